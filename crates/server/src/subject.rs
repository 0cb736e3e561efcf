//! Who an operation acts as, for access control: the subject of a connection's identity and
//! group membership read from the store (in the operation's read transaction, or the writer's).

use crate::identity::Identity;
use lmdir_access::acl::{AccessPolicy, ExactGroup, Subject};
use lmdir_schema::AttrId;
use lmdir_store::{AttributeRef, ReadTxn};

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
        let uid_prefix = member_uid_prefix(member_ndn);
        group
            .attributes()
            .filter(|attribute| self.member_attributes.contains(&attribute.attr()))
            .any(|attribute| names_member(&attribute, member_ndn, &uid_prefix))
    }

    fn is_member_of(&self, group: &ExactGroup, member_ndn: &str) -> bool {
        let Ok(id) = self.read.normalized_dn_to_id(&group.ndn) else {
            return false;
        };
        let Ok(Some(entry)) = self.read.entry(id) else {
            return false;
        };
        // As slapd: the value must equal the DN (a uniqueMember value with a UID does not).
        let holds = |attribute: &AttributeRef<'_>, value: &[u8]| {
            attribute.contains_normalized(value).unwrap_or(false)
        };
        let (mut has_class, mut has_member) = (false, false);
        for attribute in entry.attributes() {
            if attribute.attr() == group.object_class_attribute {
                has_class |= holds(&attribute, group.object_class.as_bytes());
            } else if attribute.attr() == group.member_attribute {
                has_member |= holds(&attribute, member_ndn.as_bytes());
            }
        }
        has_class && has_member
    }
}

/// Whether one of the attribute's values names `member_ndn` (with or without a UID).
fn names_member(attribute: &AttributeRef<'_>, member_ndn: &str, uid_prefix: &[u8]) -> bool {
    attribute
        .contains_normalized(member_ndn.as_bytes())
        .unwrap_or(false)
        || attribute.has_value_with_prefix(uid_prefix).unwrap_or(false)
}

/// `member_ndn#`: how a uniqueMember value naming `member_ndn` with a UID starts (a
/// member / uniqueMember value names it when equal to it or starting with this).
pub(crate) fn member_uid_prefix(member_ndn: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(member_ndn.len() + 1);
    prefix.extend_from_slice(member_ndn.as_bytes());
    prefix.push(b'#');
    prefix
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
