//! Object ids as the rest of the crate names them: a type `store` owns,
//! so that only `store` speaks gix (ARCHITECTURE.md, the `store` layer).
//! It is converted to and from gix's id at the store's own calls into
//! gix; above, it is a value with a hex text, compared, ordered and
//! hashed like the id it holds.

use std::fmt;
use std::str::FromStr;

/// The id of a git object (a commit, tree or blob).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Oid(gix::ObjectId);

/// A text that is not an object id's hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an object id (40 or 64 hex digits)")]
pub struct BadOid {
    pub text: String,
}

impl Oid {
    /// The id whose hex is `hex` (40 digits for SHA-1, 64 for SHA-256).
    pub fn from_hex(hex: &[u8]) -> Result<Oid, BadOid> {
        gix::ObjectId::from_hex(hex).map(Oid).map_err(|_| BadOid {
            text: String::from_utf8_lossy(hex).into_owned(),
        })
    }

    /// The all-zero SHA-1 id git uses for "no object".
    pub fn null() -> Oid {
        Oid(gix::ObjectId::null(gix::hash::Kind::Sha1))
    }

    /// Whether this is the all-zero id of "no object".
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }

    /// The id's full hex text.
    pub fn to_hex(&self) -> String {
        self.0.to_string()
    }

    /// The id's raw bytes (20 for SHA-1).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// gix's borrowed id, for the store's calls into gix.
    pub(in crate::store) fn as_gix(&self) -> &gix::oid {
        self.0.as_ref()
    }
}

impl From<gix::ObjectId> for Oid {
    fn from(id: gix::ObjectId) -> Oid {
        Oid(id)
    }
}

impl From<&gix::oid> for Oid {
    fn from(id: &gix::oid) -> Oid {
        Oid(id.to_owned())
    }
}

impl From<Oid> for gix::ObjectId {
    fn from(id: Oid) -> gix::ObjectId {
        id.0
    }
}

impl AsRef<gix::oid> for Oid {
    fn as_ref(&self) -> &gix::oid {
        self.0.as_ref()
    }
}

impl PartialEq<gix::ObjectId> for Oid {
    fn eq(&self, other: &gix::ObjectId) -> bool {
        self.0 == *other
    }
}

impl PartialEq<Oid> for gix::ObjectId {
    fn eq(&self, other: &Oid) -> bool {
        *self == other.0
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// As gix's id shows itself (`Sha1(…)`), so debug output is unchanged.
impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl FromStr for Oid {
    type Err = BadOid;
    fn from_str(s: &str) -> Result<Oid, BadOid> {
        Oid::from_hex(s.as_bytes())
    }
}

/// As its hex text, the way the records have always written ids.
impl serde::Serialize for Oid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Oid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Oid, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY_BLOB: &str = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";

    #[test]
    fn an_id_reads_and_writes_as_its_hex() {
        let id: Oid = EMPTY_BLOB.parse().expect("hex");
        assert_eq!(id.to_string(), EMPTY_BLOB);
        assert_eq!(id.to_hex(), EMPTY_BLOB);
        assert_eq!(Oid::from_hex(EMPTY_BLOB.as_bytes()), Ok(id));
        let json = serde_json::to_string(&id).expect("serialize");
        assert_eq!(json, format!("\"{EMPTY_BLOB}\""));
        assert_eq!(serde_json::from_str::<Oid>(&json).expect("parse"), id);
        assert!(!id.is_null());
        assert!(Oid::null().is_null());
        assert_eq!(Oid::null().to_string(), "0".repeat(40));
    }

    #[test]
    fn a_text_that_is_no_id_is_refused_with_what_it_was() {
        for bad in ["", "e69de", "not hex at all", &format!("{EMPTY_BLOB}0")] {
            let err = bad.parse::<Oid>().expect_err(bad);
            assert_eq!(err.text, bad);
            assert!(serde_json::from_str::<Oid>(&format!("\"{bad}\"")).is_err());
        }
    }
}
