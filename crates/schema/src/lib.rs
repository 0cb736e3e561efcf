//! lmdir-schema: the LDAP data model shared by every lmdir crate — result codes and errors,
//! the schema (built-in + OpenLDAP `.schema` files), attribute descriptions, matching rules and
//! value normalization (RFC 4517/4518), DNs (RFC 4514), entries and modifications, filters
//! (RFC 4515 parse, prepare, three-valued evaluate) and schema checking. No I/O except reading
//! `.schema` files.

mod check;
mod dn;
mod entry;
mod error;
mod filter;
mod matching;
mod normalized_attributes;
mod normalized_dn;
mod prep;
mod schema;
mod schema_text;
mod syntax;

pub use check::{
    is_glue_class_value, CheckedAttribute, CheckedEntry, ALIAS_CLASS_VALUES, GLUE_CLASS_VALUES,
    SUBENTRY_CLASS_VALUES,
};
pub use dn::{
    dn_has_simple_shape, escape_value, normalized_dn_is_descendant_of, normalized_dn_is_within,
    normalized_dn_parent, split_rdns, Ava, Dn, Rdn, DN_RDN_COUNT_MAX, DN_SIZE_BYTES_MAX,
    RDN_AVA_COUNT_MAX,
};
pub use entry::{Attribute, Entry, ModOp, Modification};
pub use error::{LdapError, ResultCode};
pub use filter::{
    heap_block_bytes, is_filter_name_byte, substrings_match, visit_dn_avas, AttributeVisitor,
    CoveredAttribute, EntryIdSet, EntryView, Filter, InChainQuery, OwnedEntryView, PreparedFilter,
    StoredValue, Tri, FILTER_ITEMS_MAX,
};
pub use matching::{
    MatchingRule, MatchingRuleKind, NormalizationFamily, SubstringPosition, VALUE_SIZE_BYTES_MAX,
};
pub use normalized_attributes::{NormalizedAttributes, NormalizedEntryView};
pub use normalized_dn::{
    normalization_counts, normalizations_during, NormalizationCounts, NormalizedDn,
};
pub use prep::{may_prepare_differently_than_rfc4518, prepare_string};
pub use schema::{
    options_match, AttrId, AttributeDescription, AttributeType, AttributeUsage, KnownAttributes,
    ObjectClass, ObjectClassId, ObjectClassKind, Schema, SchemaError, BUILTIN_SCHEMA_TEXT,
    DESCRIPTION_OPTIONS_MAX, HIDDEN_FROM_SUBSCHEMA, SCHEMA_DEFINITIONS_MAX,
};
pub use schema_text::strip_ordering_prefix;
pub use syntax::{generalized_time_unix_seconds, Syntax};

#[cfg(test)]
mod thread_safety {
    /// The schema and prepared filters are shared across loader threads and connections.
    #[test]
    fn shared_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<crate::Schema>();
        assert_send_sync::<crate::PreparedFilter>();
        assert_send_sync::<crate::Filter>();
        assert_send_sync::<crate::Entry>();
        assert_send_sync::<crate::LdapError>();
        assert_send_sync::<crate::OwnedEntryView>();
    }
}
