//! The JSON-RPC request id.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON-RPC request id: a string or an integer (MCP forbids `null` ids in
/// requests; JSON-RPC allows `null` only in an error response, which
/// [`Message::ErrorResponse`](super::Message::ErrorResponse) models as `None`).
///
/// Numbers are kept when they are integers in the `i64` range; fractions,
/// exponents and larger integers are not ids ([`ParseErrorKind::InvalidShape`](super::ParseErrorKind::InvalidShape)).
/// Strings borrow from the frame unless they contain escapes.
///
/// `Display` and `Serialize` write the id as its JSON value, so `7` and `"7"`
/// stay distinct:
///
/// ```
/// use mcp_framer_jsonrpc::Id;
///
/// assert_eq!(Id::Number(7).to_string(), "7");
/// assert_eq!(Id::from("7").to_string(), "\"7\"");
/// assert_eq!(serde_json::to_string(&Id::from("a\"b")).unwrap(), r#""a\"b""#);
/// let id: Id<'_> = serde_json::from_str("-3").unwrap();
/// assert_eq!(id, Id::Number(-3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id<'a> {
    /// An integer id.
    Number(i64),
    /// A string id.
    Str(Cow<'a, str>),
}

/// An id that owns its string.
pub type OwnedId = Id<'static>;

impl Id<'_> {
    /// Converts into an id that owns its string (no copy for numbers or
    /// already owned strings).
    pub fn into_owned(self) -> OwnedId {
        match self {
            Id::Number(n) => Id::Number(n),
            Id::Str(s) => Id::Str(Cow::Owned(s.into_owned())),
        }
    }

    /// Copies into an id that owns its string.
    pub fn to_owned_id(&self) -> OwnedId {
        match self {
            Id::Number(n) => Id::Number(*n),
            Id::Str(s) => Id::Str(Cow::Owned(s.as_ref().to_owned())),
        }
    }
}

impl From<i64> for Id<'static> {
    fn from(n: i64) -> Self {
        Id::Number(n)
    }
}

impl<'a> From<&'a str> for Id<'a> {
    fn from(s: &'a str) -> Self {
        Id::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Id<'static> {
    fn from(s: String) -> Self {
        Id::Str(Cow::Owned(s))
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::Str(s) => match serde_json::to_string(s.as_ref()) {
                Ok(json) => f.write_str(&json),
                Err(_) => Err(fmt::Error),
            },
        }
    }
}

impl Serialize for Id<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => serializer.serialize_i64(*n),
            Id::Str(s) => serializer.serialize_str(s),
        }
    }
}

/// Accepts what [`parse`](super::parse) accepts as an id: a string, or an
/// integer in the `i64` range. Borrows the string when the format allows it.
impl<'de: 'a, 'a> Deserialize<'de> for Id<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl<'de> Visitor<'de> for IdVisitor {
    type Value = Id<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or an integer in the i64 range")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Id::Number(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        i64::try_from(n).map(Id::Number).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(n), &self))
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Id::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Id::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(Id::Str(Cow::Owned(s)))
    }
}
