//! Object ids (of commits, trees, blobs) as every layer names them and
//! the records write them: 20 bytes, read and written as 40 hex digits.
//! Below `event` so that records can hold them typed; without gix, which
//! only `store` uses: `store/oid.rs` converts to and from gix's id at
//! the store's own calls into gix.

use std::fmt;
use std::str::FromStr;

/// The length of an id in bytes (SHA-1, the hash git-orch's gix is built
/// for).
const LEN: usize = 20;

/// The id of a git object.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Oid([u8; LEN]);

/// A text that is not an object id's hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an object id (40 hex digits)")]
pub struct BadOid {
    pub text: String,
}

impl Oid {
    /// The id whose hex is `hex` (40 digits, either case).
    pub fn from_hex(hex: &[u8]) -> Result<Oid, BadOid> {
        let bad = || BadOid {
            text: String::from_utf8_lossy(hex).into_owned(),
        };
        if hex.len() != 2 * LEN {
            return Err(bad());
        }
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let mut bytes = [0u8; LEN];
        for (i, pair) in hex.chunks(2).enumerate() {
            bytes[i] = digit(pair[0]).ok_or_else(bad)? << 4 | digit(pair[1]).ok_or_else(bad)?;
        }
        Ok(Oid(bytes))
    }

    /// The id of these raw bytes.
    pub fn from_bytes(bytes: [u8; LEN]) -> Oid {
        Oid(bytes)
    }

    /// The all-zero id git uses for "no object".
    pub fn null() -> Oid {
        Oid([0; LEN])
    }

    /// Whether this is the all-zero id of "no object".
    pub fn is_null(&self) -> bool {
        self.0 == [0; LEN]
    }

    /// The id's full hex text.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// The id's 20 raw bytes (not its hex: `from_hex` takes the hex).
    pub fn raw_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// As gix's id showed itself (`Sha1(…)`), so debug output is unchanged.
impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha1({self})")
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
        s.collect_str(self)
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
        assert_eq!(format!("{id:?}"), format!("Sha1({EMPTY_BLOB})"));
        assert_eq!(Oid::from_hex(EMPTY_BLOB.to_uppercase().as_bytes()), Ok(id));
        let json = serde_json::to_string(&id).expect("serialize");
        assert_eq!(json, format!("\"{EMPTY_BLOB}\""));
        assert_eq!(serde_json::from_str::<Oid>(&json).expect("parse"), id);
        assert!(!id.is_null());
        assert!(Oid::null().is_null());
        assert_eq!(Oid::null().to_string(), "0".repeat(40));
    }

    #[test]
    fn a_text_that_is_no_id_is_refused_with_what_it_was() {
        let long = format!("{EMPTY_BLOB}0");
        let not_hex = format!("{}g", &EMPTY_BLOB[..39]);
        for bad in ["", "e69de", "not hex at all", &long, &not_hex, "+1"] {
            let err = bad.parse::<Oid>().expect_err(bad);
            assert_eq!(err.text, bad);
            assert!(serde_json::from_str::<Oid>(&format!("\"{bad}\"")).is_err());
        }
    }
}
