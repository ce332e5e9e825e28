//! The store's side of [`Oid`] (defined in `crate::oid`, below the
//! records): conversions to and from gix's id at the store's own calls
//! into gix, so that only `store` speaks gix.

pub use crate::oid::{BadOid, Oid};

impl Oid {
    /// gix's borrowed id, for the store's calls into gix.
    pub(in crate::store) fn as_gix(&self) -> &gix::oid {
        gix::oid::from_bytes_unchecked(self.raw_bytes())
    }
}

impl From<gix::ObjectId> for Oid {
    fn from(id: gix::ObjectId) -> Oid {
        Oid::from(id.as_ref())
    }
}

impl From<&gix::oid> for Oid {
    fn from(id: &gix::oid) -> Oid {
        let mut bytes = [0u8; 20];
        bytes.copy_from_slice(id.as_bytes());
        Oid::from_bytes(bytes)
    }
}

impl From<Oid> for gix::ObjectId {
    fn from(id: Oid) -> gix::ObjectId {
        id.as_gix().to_owned()
    }
}

impl AsRef<gix::oid> for Oid {
    fn as_ref(&self) -> &gix::oid {
        self.as_gix()
    }
}

impl PartialEq<gix::ObjectId> for Oid {
    fn eq(&self, other: &gix::ObjectId) -> bool {
        self.as_gix() == other.as_ref()
    }
}

impl PartialEq<Oid> for gix::ObjectId {
    fn eq(&self, other: &Oid) -> bool {
        other == self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_goes_to_gix_and_back_unchanged() {
        let hex = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        let id: Oid = hex.parse().expect("hex");
        let gix_id = gix::ObjectId::from(id);
        assert_eq!(gix_id.to_string(), hex);
        assert_eq!(Oid::from(gix_id), id);
        assert!(id == gix_id, "Oid == gix id");
        assert!(gix_id == id, "gix id == Oid");
        assert_eq!(id.as_gix().to_string(), hex);
    }
}
