//! What a write is told and works on, below every write module: who writes and when
//! (`WriteContext`), and an attribute being written (`WorkingAttribute`). A leaf: the store's
//! hub (`store.rs`), the row encoder and the writers all use these without importing each other.

use std::time::SystemTime;

use lmdir_schema::AttrId;

use crate::codec::ATTRIBUTES_PER_ENTRY_MAX;

/// Who writes and when; `skip_schema_check` is for trusted imports and internal updates.
#[derive(Clone, Debug)]
pub struct WriteContext {
    pub actor_dn: String,
    pub now: SystemTime,
    pub skip_schema_check: bool,
    /// Keep NO-USER-MODIFICATION attributes the writer supplies (entryUUID, creatorsName,
    /// memberOf, ...): only the loader, replication and the Relax control may; otherwise they
    /// are refused with constraintViolation (as OpenLDAP).
    pub relax: bool,
    /// The entry comes from a replication provider: the entryCSN, modifyTimestamp and
    /// modifiersName it carries are the provider's and are kept, never restamped here. The
    /// contextCSN does not follow it: the consumer advances it from the provider's cookie in
    /// the same transaction (`advance_context_csn`), once everything that cookie covers is
    /// applied, since a refresh sends entries in tree order, not CSN order.
    pub replicated: bool,
    /// Most attribute descriptions an entry may hold after this write (adminLimitExceeded
    /// beyond); never above the codec's own `ATTRIBUTES_PER_ENTRY_MAX`.
    pub attribute_descriptions_per_entry_max: usize,
    /// The permissive modify control: a modify adding a value that is there or deleting one
    /// that is not skips it (`Schema::apply_modification_with`).
    pub permissive_modify: bool,
    /// An import (`lmdir load` into a store that holds entries), as slapadd takes one: an
    /// added entry may be placed below any parent, an alias or a subentry too (otherwise
    /// refused as back-mdb refuses it, `WriteTxn::refuse_parent_class`), and the memberOf it
    /// carries is not held against the groups (a group later in the file may list it): on a
    /// store that keeps memberOf it is set from the groups, as a replicated add's is.
    pub import: bool,
}

impl WriteContext {
    pub fn new(actor_dn: impl Into<String>) -> WriteContext {
        WriteContext {
            actor_dn: actor_dn.into(),
            now: SystemTime::now(),
            skip_schema_check: false,
            relax: false,
            replicated: false,
            attribute_descriptions_per_entry_max: ATTRIBUTES_PER_ENTRY_MAX,
            permissive_modify: false,
            import: false,
        }
    }
}

/// One attribute of an entry being written: canonical description and (original, normalized).
#[derive(Clone, Debug)]
pub(crate) struct WorkingAttribute {
    pub text: String,
    pub attr: AttrId,
    pub options: Vec<String>,
    pub values: Vec<(Vec<u8>, Vec<u8>)>,
}
