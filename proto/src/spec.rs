//! The cohort spec, typed: what a `Join` asks for once it has passed R3, D6 and D7.
//!
//! Owns: the typed [`Spec`] ([`Binding`], admin, `ALL`, history, closed), its [`Authorship`],
//! the canonical [`CohortKey`] (R1) and [`validate_join`], which turns a decoded `Join` into a
//! [`ValidJoin`] or names the one [`RejectReason`] it breaks.
//!
//! Never: broker policy. `history` is accepted here because refusing it is the broker's
//! choice (R3 "MAY", D11); capacity (FULL) and roles are the broker core's. The key is built
//! from the typed spec, never from the peer's bytes, so unknown fields and explicitly encoded
//! default values cannot split one cohort into two.

use std::fmt;

use bytes::Bytes;
use prost::Message;

use crate::pb::{CohortSpec, Join, PublisherRegime, TopicBinding};
use crate::{ADDRESS_BYTES, Address, TOPIC_BYTES};

/// How the topic relates to the chunks published under it (R11); `UNSPECIFIED` has no
/// typed value because it is always rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Binding {
    /// GSOC: the topic is the shared SOC address.
    Anchor,
    /// MOC: the topic is the fixed chunk id.
    SocId,
    /// MIC: the topic is keccak256 of the fixed owner.
    Owner,
    /// A feed topic: ids are keccak256(topic ‖ be64(index)).
    FeedTopic,
    /// A plain name: any chunk, any owner.
    Mnemonic,
}

impl Binding {
    /// The typed binding of a wire value; `None` for `TOPIC_BINDING_UNSPECIFIED`.
    pub fn from_pb(binding: TopicBinding) -> Option<Self> {
        match binding {
            TopicBinding::Unspecified => None,
            TopicBinding::Anchor => Some(Self::Anchor),
            TopicBinding::SocId => Some(Self::SocId),
            TopicBinding::Owner => Some(Self::Owner),
            TopicBinding::FeedTopic => Some(Self::FeedTopic),
            TopicBinding::Mnemonic => Some(Self::Mnemonic),
        }
    }

    /// The wire value of this binding.
    pub fn to_pb(self) -> TopicBinding {
        match self {
            Self::Anchor => TopicBinding::Anchor,
            Self::SocId => TopicBinding::SocId,
            Self::Owner => TopicBinding::Owner,
            Self::FeedTopic => TopicBinding::FeedTopic,
            Self::Mnemonic => TopicBinding::Mnemonic,
        }
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.to_pb().as_str_name())
    }
}

/// Who may publish in a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Authorship {
    /// No admin: anyone whose chunks fit the binding's SOC shape, no claim, no salt (R11).
    Implicit,
    /// An admin, `publishers` unset: the admin and its current roster (R12).
    Explicit,
    /// An admin and `publishers = ALL`: any declared addr, session-feed chunks (R10).
    All,
}

/// A cohort spec that passed [`validate_join`] (or was built by a client that knows the rules;
/// [`Spec::check`] applies them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The 32-byte topic, meaning per binding.
    pub topic: [u8; TOPIC_BYTES],
    /// How the topic relates to the chunks.
    pub binding: Binding,
    /// The admin's address; `None` is implicit authorship.
    pub admin: Option<Address>,
    /// `publishers = ALL` (requires an admin and `MNEMONIC`, D7).
    pub all: bool,
    /// The joiner asks for retained chunks; the broker may refuse (D11).
    pub history: bool,
    /// No audience: non-publishers are silent (R9).
    pub closed: bool,
}

impl Spec {
    /// The publishing regime. `all` wins, so a spec that breaks D7 (`ALL` without admin)
    /// still reads as `All`; [`Spec::check`] rejects it.
    pub fn authorship(&self) -> Authorship {
        match (self.all, self.admin) {
            (true, _) => Authorship::All,
            (false, Some(_)) => Authorship::Explicit,
            (false, None) => Authorship::Implicit,
        }
    }

    /// The combination rules of R3 and D7; field sizes are already guaranteed by the types.
    pub fn check(&self) -> Result<(), RejectReason> {
        if self.all && self.admin.is_none() {
            return Err(RejectReason::AllWithoutAdmin);
        }
        if self.all && self.binding != Binding::Mnemonic {
            return Err(RejectReason::AllWithoutMnemonic {
                binding: self.binding,
            });
        }
        if self.closed && self.all {
            return Err(RejectReason::ClosedWithAll);
        }
        if self.closed && self.admin.is_none() {
            return Err(RejectReason::ClosedImplicit);
        }
        Ok(())
    }

    /// The wire form of this spec, with every default field left at its default.
    pub fn to_pb(&self) -> CohortSpec {
        CohortSpec {
            topic: Bytes::copy_from_slice(&self.topic),
            binding: self.binding.to_pb() as i32,
            admin: self
                .admin
                .map_or_else(Bytes::new, |admin| Bytes::copy_from_slice(&admin)),
            publishers: if self.all {
                PublisherRegime::All as i32
            } else {
                PublisherRegime::Unspecified as i32
            },
            history: self.history,
            closed: self.closed,
        }
    }

    /// A `Join` for this spec declaring `addr` as the stream's identity.
    pub fn to_join(&self, addr: &Address) -> Join {
        Join {
            cohort: Some(self.to_pb()),
            addr: Bytes::copy_from_slice(addr),
        }
    }

    /// The cohort's identity (R1): the protobuf encoding of the typed spec, which puts the
    /// fields in number order and omits every default one:
    /// `0A 20 <topic> 10 <binding> [1A 14 <admin>] [20 01] [28 01] [30 01]`.
    pub fn key(&self) -> CohortKey {
        CohortKey(Bytes::from(self.to_pb().encode_to_vec()))
    }
}

/// The canonical bytes of a cohort spec (R1); equal keys are the same cohort.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CohortKey(Bytes);

impl CohortKey {
    /// A key from bytes a caller holds (an operator's `/cohortz?key=` lookup). Bytes that are
    /// not some spec's canonical encoding simply match no cohort.
    pub fn from_bytes(bytes: Bytes) -> CohortKey {
        CohortKey(bytes)
    }

    /// The canonical bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The canonical bytes as lowercase hex, for logs and the admin endpoints.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(self.0.len() * 2);
        for byte in self.0.iter() {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
        hex
    }
}

impl fmt::Debug for CohortKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "CohortKey({})", self.to_hex())
    }
}

impl fmt::Display for CohortKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_hex())
    }
}

/// A `Join` that passed R3, D6 and D7.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValidJoin {
    /// The typed spec.
    pub spec: Spec,
    /// The stream's declared identity.
    pub addr: Address,
    /// `spec.key()`, computed once.
    pub key: CohortKey,
}

/// Why a `Join` is answered `REJECTED`: one variant per rule of R3, D6 and D7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The `Join` has no `cohort`.
    MissingCohort,
    /// `binding` is `TOPIC_BINDING_UNSPECIFIED` (or absent, which proto3 cannot tell apart).
    BindingUnspecified,
    /// `binding` is not a `TopicBinding` value.
    BindingUnknown {
        /// The value on the wire.
        value: i32,
    },
    /// `publishers` is neither unset nor `ALL`.
    PublishersUnknown {
        /// The value on the wire.
        value: i32,
    },
    /// `topic` is not 32 bytes.
    TopicLength {
        /// Its length on the wire.
        bytes: usize,
    },
    /// `admin` is present but not 20 bytes (proto3 empty bytes means absent).
    AdminLength {
        /// Its length on the wire.
        bytes: usize,
    },
    /// `addr` is not 20 bytes; 0 means it is missing (it is required, D6).
    AddrLength {
        /// Its length on the wire.
        bytes: usize,
    },
    /// `closed` with `publishers = ALL` (R3).
    ClosedWithAll,
    /// `closed` without an admin (R3).
    ClosedImplicit,
    /// `publishers = ALL` without an admin (D7).
    AllWithoutAdmin,
    /// `publishers = ALL` with a binding other than `MNEMONIC` (D7).
    AllWithoutMnemonic {
        /// The binding asked for.
        binding: Binding,
    },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingCohort => write!(formatter, "Join has no cohort spec"),
            Self::BindingUnspecified => {
                write!(formatter, "cohort binding is TOPIC_BINDING_UNSPECIFIED")
            }
            Self::BindingUnknown { value } => {
                write!(
                    formatter,
                    "cohort binding {value} is not a known TopicBinding"
                )
            }
            Self::PublishersUnknown { value } => write!(
                formatter,
                "cohort publishers {value} is not a known PublisherRegime"
            ),
            Self::TopicLength { bytes } => write!(
                formatter,
                "cohort topic is {bytes} bytes, expected {TOPIC_BYTES}"
            ),
            Self::AdminLength { bytes } => write!(
                formatter,
                "cohort admin is {bytes} bytes, expected {ADDRESS_BYTES} or absent"
            ),
            Self::AddrLength { bytes: 0 } => {
                write!(
                    formatter,
                    "Join addr is missing (required, {ADDRESS_BYTES} bytes)"
                )
            }
            Self::AddrLength { bytes } => write!(
                formatter,
                "Join addr is {bytes} bytes, expected {ADDRESS_BYTES}"
            ),
            Self::ClosedWithAll => write!(formatter, "closed is not allowed with publishers ALL"),
            Self::ClosedImplicit => write!(
                formatter,
                "closed is not allowed under implicit authorship (no admin)"
            ),
            Self::AllWithoutAdmin => write!(formatter, "publishers ALL requires an admin"),
            Self::AllWithoutMnemonic { binding } => write!(
                formatter,
                "publishers ALL requires binding MNEMONIC, not {binding}"
            ),
        }
    }
}

impl std::error::Error for RejectReason {}

/// Checks a decoded `Join` against R3, D6 and D7 and types it.
///
/// The first broken rule is reported, in this order: cohort, binding, publishers, topic,
/// admin, addr, then the combinations of [`Spec::check`]. `history` is not judged here.
pub fn validate_join(join: &Join) -> Result<ValidJoin, RejectReason> {
    let cohort = join.cohort.as_ref().ok_or(RejectReason::MissingCohort)?;

    let binding = match TopicBinding::try_from(cohort.binding) {
        Ok(wire) => Binding::from_pb(wire).ok_or(RejectReason::BindingUnspecified)?,
        Err(_) => {
            return Err(RejectReason::BindingUnknown {
                value: cohort.binding,
            });
        }
    };

    // PUBLISHER_REGIME_UNSPECIFIED is the proto3 default, so on the wire it is "unset", which
    // is allowed; only values outside the enum are rejected.
    let all = match PublisherRegime::try_from(cohort.publishers) {
        Ok(PublisherRegime::Unspecified) => false,
        Ok(PublisherRegime::All) => true,
        Err(_) => {
            return Err(RejectReason::PublishersUnknown {
                value: cohort.publishers,
            });
        }
    };

    let topic = <[u8; TOPIC_BYTES]>::try_from(cohort.topic.as_ref()).map_err(|_| {
        RejectReason::TopicLength {
            bytes: cohort.topic.len(),
        }
    })?;

    let admin = if cohort.admin.is_empty() {
        None
    } else {
        Some(
            Address::try_from(cohort.admin.as_ref()).map_err(|_| RejectReason::AdminLength {
                bytes: cohort.admin.len(),
            })?,
        )
    };

    let addr = Address::try_from(join.addr.as_ref()).map_err(|_| RejectReason::AddrLength {
        bytes: join.addr.len(),
    })?;

    let spec = Spec {
        topic,
        binding,
        admin,
        all,
        history: cohort.history,
        closed: cohort.closed,
    };
    spec.check()?;
    Ok(ValidJoin {
        spec,
        addr,
        key: spec.key(),
    })
}
