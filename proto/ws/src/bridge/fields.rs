//! `swarm-soc-fields` (W6): which parts of a delivered chunk a bridge session receives, in
//! which order.
//!
//! Owns: [`Field`], the field names (case-insensitive, as bee's SOC-subscription endpoints
//! spell them) and [`Fields`], an ordered list without repeats packed into a `u32`, so the
//! broker can compare and hash lists for free and render a delivery once per distinct list.
//! Never: the bytes of a field (that is [`super::render`]).

use std::fmt;

/// Bits per field code in [`Fields`]: seven codes fit in four bits, seven fields in 28.
const CODE_BITS: u32 = 4;
/// Masks one code.
const CODE_MASK: u32 = (1 << CODE_BITS) - 1;

/// One part of a delivered chunk; the discriminant is its code in [`Fields`] (0 ends a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Field {
    /// The SOC address, `keccak256(id ‖ owner)`.
    Address = 1,
    /// The signer's public key, SEC1 compressed (33 bytes).
    RecoveredPubKey = 2,
    /// The chunk id (32 bytes).
    Identifier = 3,
    /// The signature (65 bytes).
    Signature = 4,
    /// The wrapped CAC's address (32 bytes).
    WrappedAddress = 5,
    /// The span (8 bytes, little-endian).
    Span = 6,
    /// The payload (0 to 4096 bytes).
    Payload = 7,
}

/// How many fields there are: a list holds each at most once, so a rendered message has at
/// most this many parts.
pub const FIELD_KINDS: usize = 7;

/// Every field with its W6 name, at position code - 1.
const FIELD_NAMES: [(Field, &str); FIELD_KINDS] = [
    (Field::Address, "address"),
    (Field::RecoveredPubKey, "recoveredPubKey"),
    (Field::Identifier, "identifier"),
    (Field::Signature, "signature"),
    (Field::WrappedAddress, "wrappedAddress"),
    (Field::Span, "span"),
    (Field::Payload, "payload"),
];

const _: () = {
    assert!(FIELD_NAMES.len() as u32 * CODE_BITS <= u32::BITS);
    assert!(FIELD_NAMES.len() as u32 <= CODE_MASK);
    let mut position = 0;
    while position < FIELD_NAMES.len() {
        assert!(FIELD_NAMES[position].0 as usize == position + 1);
        position += 1;
    }
};

impl Field {
    fn code(self) -> u32 {
        u32::from(self as u8)
    }

    fn from_code(code: u32) -> Option<Field> {
        let position = usize::try_from(code.checked_sub(1)?).ok()?;
        FIELD_NAMES.get(position).map(|(field, _)| *field)
    }

    /// The field named `name`, ignoring ASCII case.
    pub fn from_name(name: &str) -> Option<Field> {
        FIELD_NAMES
            .iter()
            .find(|(_, known)| known.eq_ignore_ascii_case(name))
            .map(|(field, _)| *field)
    }

    /// The W6 name.
    pub fn name(self) -> &'static str {
        // The const block above puts every field at position code - 1.
        FIELD_NAMES[usize::from(self as u8) - 1].1
    }
}

/// A `swarm-soc-fields` entry that names no field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnknownField {
    /// The entry as sent, trimmed.
    pub name: String,
}

impl fmt::Display for UnknownField {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = FIELD_NAMES.iter().map(|(_, name)| *name).collect();
        write!(
            formatter,
            "unknown field {:?} (expected a comma-separated list of {})",
            self.name,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownField {}

/// An ordered list of distinct fields, never empty; `[payload]` by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fields(u32);

impl Fields {
    /// The list of `fields` in order, a repeat dropped (the first kept); empty is
    /// `[payload]`.
    pub fn new(fields: &[Field]) -> Fields {
        let mut packed = 0u32;
        let mut count = 0;
        for field in fields {
            if Fields(packed).iter().any(|present| present == *field) {
                continue;
            }
            packed |= field.code() << (CODE_BITS * count);
            count += 1;
        }
        if packed == 0 {
            Fields::default()
        } else {
            Fields(packed)
        }
    }

    /// Parses a `swarm-soc-fields` value: comma-separated names, any case, whitespace
    /// around a name and empty entries ignored, a repeat dropped; nothing named is
    /// `[payload]`.
    ///
    /// # Errors
    /// An entry that names no field.
    pub fn parse(list: &str) -> Result<Fields, UnknownField> {
        let fields = list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| {
                Field::from_name(name).ok_or_else(|| UnknownField {
                    name: name.to_owned(),
                })
            })
            .collect::<Result<Vec<Field>, UnknownField>>()?;
        Ok(Fields::new(&fields))
    }

    /// The packed list: equal keys are equal lists.
    pub fn key(&self) -> u32 {
        self.0
    }

    /// The fields in the order asked.
    pub fn iter(&self) -> impl Iterator<Item = Field> + use<> {
        let packed = self.0;
        (0..u32::BITS / CODE_BITS)
            .map(move |position| (packed >> (CODE_BITS * position)) & CODE_MASK)
            .take_while(|code| *code != 0)
            .filter_map(Field::from_code)
    }
}

impl Default for Fields {
    fn default() -> Fields {
        Fields(Field::Payload.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_in_any_case_in_the_order_asked() {
        let fields =
            Fields::parse(" Signature,identifier , PAYLOAD,recoveredpubkey").expect("known");
        assert_eq!(
            fields.iter().collect::<Vec<_>>(),
            [
                Field::Signature,
                Field::Identifier,
                Field::Payload,
                Field::RecoveredPubKey
            ]
        );
        let all = Fields::parse(
            "address,recoveredPubKey,identifier,signature,wrappedAddress,span,payload",
        )
        .expect("known");
        assert_eq!(all.iter().count(), 7);
        assert_eq!(
            all.iter().map(Field::name).collect::<Vec<_>>().join(","),
            "address,recoveredPubKey,identifier,signature,wrappedAddress,span,payload"
        );
    }

    #[test]
    fn empty_means_payload_and_repeats_keep_the_first() {
        for empty in ["", " ", ",", " , ,"] {
            assert_eq!(Fields::parse(empty), Ok(Fields::default()), "{empty:?}");
        }
        assert_eq!(
            Fields::default().iter().collect::<Vec<_>>(),
            [Field::Payload]
        );
        let repeated = Fields::parse("span,payload,SPAN,payload,span").expect("known");
        assert_eq!(
            repeated.iter().collect::<Vec<_>>(),
            [Field::Span, Field::Payload]
        );
        assert_eq!(repeated, Fields::new(&[Field::Span, Field::Payload]));
    }

    #[test]
    fn unknown_names_are_refused_by_name() {
        let error = Fields::parse("payload,owner").expect_err("owner is no field");
        assert_eq!(
            error,
            UnknownField {
                name: "owner".to_owned()
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("unknown field \"owner\" (expected")
        );
        assert!(Fields::parse("pay load").is_err());
    }

    #[test]
    fn keys_differ_exactly_when_lists_differ() {
        let lists = [
            "payload",
            "span,payload",
            "payload,span",
            "address",
            "address,payload",
            "wrappedAddress,recoveredPubKey",
        ];
        let keys: Vec<u32> = lists
            .iter()
            .map(|list| Fields::parse(list).expect("known").key())
            .collect();
        for (position, key) in keys.iter().enumerate() {
            assert!(!keys[position + 1..].contains(key), "{}", lists[position]);
        }
        assert_eq!(
            Fields::parse("SPAN, payload").map(|fields| fields.key()),
            Fields::parse("span,payload").map(|fields| fields.key())
        );
    }
}
