//! The cohort spec as command-line flags: `--topic HEX32 --binding NAME [--admin HEX20]
//! [--all] [--closed] [--history]`.
//!
//! Owns: [`SpecArgs`] (a clap `Args` group shared by `bps sub`, `pub`, `roster` and `eos`),
//! the binding names ([`BindingArg`]) and the conversion to a typed [`Spec`] that passes
//! [`Spec::check`] (R3, D7), so a spec the broker is bound to refuse never leaves the client.
//!
//! Never: decides roles or talks to a broker; `history` is passed through (the broker may
//! refuse it, D11). It is part of the spec and so of the cohort's key (R1): publishers and
//! subscribers of one cohort must agree on it like on every other flag.

use bps_proto::{Binding, Spec};

use crate::hexarg::{ArgError, parse_fixed};

/// A binding as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BindingArg {
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

impl From<BindingArg> for Binding {
    fn from(binding: BindingArg) -> Self {
        match binding {
            BindingArg::Anchor => Self::Anchor,
            BindingArg::SocId => Self::SocId,
            BindingArg::Owner => Self::Owner,
            BindingArg::FeedTopic => Self::FeedTopic,
            BindingArg::Mnemonic => Self::Mnemonic,
        }
    }
}

/// The cohort spec flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SpecArgs {
    /// The 32-byte topic as hex (meaning per binding).
    #[arg(long, value_name = "HEX32")]
    pub topic: String,
    /// How the topic relates to the chunks.
    #[arg(long, value_enum)]
    pub binding: BindingArg,
    /// The admin's 20-byte address; absent means implicit authorship.
    #[arg(long, value_name = "HEX20")]
    pub admin: Option<String>,
    /// Publishers ALL: any declared address publishes (needs --admin and mnemonic).
    #[arg(long)]
    pub all: bool,
    /// No audience: non-publishers receive nothing but a roster naming them.
    #[arg(long)]
    pub closed: bool,
    /// Ask for retained chunks first; part of the cohort's identity (R1): the publisher and
    /// every subscriber must all join with it.
    ///
    /// A Join with history and one without are in different cohorts and never see each
    /// other's frames. A broker that keeps no history answers REJECTED (D11).
    #[arg(long)]
    pub history: bool,
}

impl SpecArgs {
    /// The typed spec, checked against R3 and D7.
    pub fn to_spec(&self) -> Result<Spec, ArgError> {
        let spec = Spec {
            topic: parse_fixed::<32>("--topic", &self.topic)?,
            binding: self.binding.into(),
            admin: self
                .admin
                .as_deref()
                .map(|admin| parse_fixed::<20>("--admin", admin))
                .transpose()?,
            all: self.all,
            history: self.history,
            closed: self.closed,
        };
        spec.check()
            .map_err(|reason| ArgError::new("spec", reason.to_string()))?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(binding: BindingArg, admin: Option<&str>, all: bool, closed: bool) -> SpecArgs {
        SpecArgs {
            topic: format!("0x{}", "ab".repeat(32)),
            binding,
            admin: admin.map(str::to_owned),
            all,
            closed,
            history: false,
        }
    }

    #[test]
    fn builds_every_configuration() {
        let admin = "11".repeat(20);
        let spec = args(BindingArg::FeedTopic, Some(&admin), false, true)
            .to_spec()
            .expect("jam");
        assert_eq!(spec.topic, [0xab; 32]);
        assert_eq!(spec.binding, Binding::FeedTopic);
        assert_eq!(spec.admin, Some([0x11; 20]));
        assert!(spec.closed);
        let group = args(BindingArg::Mnemonic, Some(&admin), true, false)
            .to_spec()
            .expect("group chat");
        assert!(group.all);
        let implicit = args(BindingArg::SocId, None, false, false)
            .to_spec()
            .expect("implicit");
        assert_eq!(implicit.admin, None);
    }

    #[test]
    fn refuses_what_the_broker_must_reject() {
        let error = args(BindingArg::Mnemonic, None, true, false)
            .to_spec()
            .expect_err("ALL without admin");
        assert_eq!(error.argument, "spec");
        let error = args(BindingArg::Owner, None, false, true)
            .to_spec()
            .expect_err("closed implicit");
        assert_eq!(error.argument, "spec");
        let error = args(BindingArg::Owner, Some("11"), false, false)
            .to_spec()
            .expect_err("short admin");
        assert_eq!(
            error.to_string(),
            "--admin: expected 20 bytes of hex, got 1"
        );
    }
}
