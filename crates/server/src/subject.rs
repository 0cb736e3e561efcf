//! Who an operation acts as, for access control: the subject of a connection's identity and
//! group membership read from the store (in the operation's read transaction, or the writer's).

use crate::session::Identity;
use lmdir_access::acl::{AccessPolicy, Subject};
use lmdir_schema::AttrId;
use lmdir_store::ReadTxn;

/// Group membership over the store: `member` / `uniqueMember` of the group entry, read in the
/// operation's own read transaction.
pub(crate) struct StoreGroups<'txn> {
    pub(crate) read: &'txn ReadTxn,
    pub(crate) member_attributes: &'txn [AttrId],
}

impl lmdir_access::acl::GroupMembership for StoreGroups<'_> {
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool {
        let Ok(id) = self.read.normalized_dn_to_id(group_ndn) else {
            return false;
        };
        let Ok(Some(group)) = self.read.entry(id) else {
            return false;
        };
        self.member_attributes.iter().any(|attr| {
            group
                .values_of(*attr)
                .iter()
                .any(|(_, normalized)| names_member(normalized, member_ndn))
        })
    }
}

/// Whether a normalized member / uniqueMember value names `member_ndn` (uniqueMember may
/// carry `#uid` after the DN).
pub(crate) fn names_member(normalized: &[u8], member_ndn: &str) -> bool {
    normalized == member_ndn.as_bytes()
        || normalized.starts_with(member_ndn.as_bytes())
            && normalized.get(member_ndn.len()) == Some(&b'#')
}

/// The access-control subject of a connection's identity.
pub(crate) fn subject_for<'a>(
    policy: &AccessPolicy,
    identity: &'a Identity,
    groups: &'a dyn lmdir_access::acl::GroupMembership,
) -> Subject<'a> {
    let bound = (!identity.normalized_dn.is_empty()).then_some(identity.normalized_dn.as_str());
    let mut subject = policy.subject(bound, groups);
    subject.is_rootdn |= identity.is_rootdn;
    subject
}
