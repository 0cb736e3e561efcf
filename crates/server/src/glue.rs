//! Glue entries: the placeholders an OpenLDAP partial replica keeps for the parents it did not
//! receive (`objectClass: glue`), arriving in lmdir with a slapcat export. As back-mdb: a
//! search skips them unless ManageDsaIT is sent (and still walks below them), and a modify,
//! delete, rename or Password Modify of one without ManageDsaIT answers noSuchObject whose
//! matched DN is the glue entry's own (a Password Modify: even with it). Compare and adds (below
//! them too) are unchanged.

use lmdir_schema::{is_glue_class_value, LdapError, ResultCode, Schema};
use lmdir_store::{EntryRef, StoredEntry};

use crate::write_request::WriteRequest;

/// slapd's is_entry_glue on an entry a search reads.
pub(crate) fn entry_is_glue(schema: &Schema, entry: &EntryRef<'_>) -> bool {
    let object_class = schema.object_class_attribute();
    entry.attributes_of(object_class).any(|attribute| {
        lmdir_schema::GLUE_CLASS_VALUES.iter().any(|value| {
            attribute
                .contains_normalized(value.as_bytes())
                .unwrap_or(false)
        })
    })
}

/// slapd's is_entry_glue on an entry the writer read in its transaction.
pub(crate) fn stored_is_glue(schema: &Schema, entry: &StoredEntry<'_>) -> bool {
    entry
        .values_of(schema.object_class_attribute())
        .any(|(_, normalized)| is_glue_class_value(normalized))
}

/// Whether `request` finds no glue entry at its target: a change without ManageDsaIT, and a
/// Password Modify even with it (slapd 2.5 answers it noSuchObject either way). An add is
/// never refused for glue (below one either: slapd adds it).
pub(crate) fn hides_glue(request: &WriteRequest, manage_dsa_it: bool) -> bool {
    match request {
        WriteRequest::SetPassword { .. } => true,
        WriteRequest::Delete(_) | WriteRequest::Modify(..) | WriteRequest::ModifyDn { .. } => {
            !manage_dsa_it
        }
        _ => false,
    }
}

/// The answer to `request` naming glue entry `dn` (back-mdb's: 32, no text, matched DN the
/// entry itself; slapd's Password Modify names none).
pub(crate) fn glue_as_missing(request: &WriteRequest, dn: String) -> LdapError {
    let missing = LdapError::new(ResultCode::NoSuchObject, "");
    match request {
        WriteRequest::SetPassword { .. } => missing,
        _ => missing.with_matched_dn(dn),
    }
}
