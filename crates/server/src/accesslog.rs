//! The audit trail (`[accesslog]`), as OpenLDAP's accesslog overlay with `logops writes` keeps
//! it: one record per accepted add, modify, delete and modrdn, written by the writer in the
//! write's own transaction (a crash keeps both or neither), read back under `cn=accesslog`
//! (`search/accesslog.rs`) as auditAdd / auditModify / auditDelete / auditModRDN entries.

use crate::identity::Identity;
use crate::write_request::WriteRequest;
use lmdir_access::acl::names_lmdir_secret_attribute;
use lmdir_config::AccesslogConfig;
use lmdir_schema::{Entry, LdapError, ModOp, Modification};
use lmdir_store::accesslog::AuditRecord;
use lmdir_store::{Change, ChangeKind, WriteTxn};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The accesslog's suffix (OpenLDAP's customary `logdb`).
pub const ACCESSLOG_DN: &str = "cn=accesslog";

/// Who wrote, from which connection, when the request arrived; and the target as it was
/// before (with `log_old`).
pub(crate) struct Requester<'a> {
    pub identity: &'a Identity,
    pub session: u64,
    pub received: SystemTime,
    pub old: Option<Entry>,
}

/// The target of a modify or delete as it is before the write (for reqOld); None for other
/// requests or when it cannot be read (the write then fails on its own).
/// `target`: the request's DN, normalized.
pub(crate) fn entry_before(
    txn: &WriteTxn<'_>,
    request: &WriteRequest,
    target: &lmdir_schema::NormalizedDn,
) -> Option<Entry> {
    let (WriteRequest::Modify(..) | WriteRequest::Delete(_)) = request else {
        return None;
    };
    let found = txn.entry_by_dn(target).ok()??;
    txn.owned_entry(found.id).ok()
}

/// `attr: value` lines of `old`'s attributes `wanted` picks, in the entry's order; none of
/// lmdir's own secrets (a bearer token's value, even hashed, is never recorded).
fn old_lines(old: &Entry, wanted: &dyn Fn(&str) -> bool) -> Vec<Vec<u8>> {
    old.attributes
        .iter()
        .filter(|attribute| !names_lmdir_secret_attribute(&attribute.description))
        .filter(|attribute| wanted(&attribute.description))
        .flat_map(|attribute| {
            attribute
                .values
                .iter()
                .map(|value| [format!("{}: ", attribute.description).as_bytes(), value].concat())
        })
        .collect()
}

/// reqOld: a delete's whole entry; a modify's old values of the attributes it changed and of
/// the ones it stamped.
fn old_part(request: &WriteRequest, old: &Entry) -> Option<Vec<Vec<u8>>> {
    let lines = match request {
        WriteRequest::Delete(_) => old_lines(old, &|_| true),
        WriteRequest::Modify(_, modifications) => old_lines(old, &|description| {
            let type_of = |text: &str| text.split(';').next().unwrap_or(text).to_ascii_lowercase();
            let name = type_of(description);
            modifications
                .iter()
                .any(|modification| type_of(&modification.description) == name)
                || ["entrycsn", "modifiersname", "modifytimestamp"].contains(&name.as_str())
        }),
        _ => return None,
    };
    (!lines.is_empty()).then_some(lines)
}

fn micros(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
    })
}

/// `YYYYmmddHHMMSS.ffffffZ` of a key (microseconds since the epoch), as reqStart is written.
pub fn generalized_time(key_micros: u64) -> String {
    let time = UNIX_EPOCH + Duration::from_micros(key_micros);
    String::from_utf8_lossy(&lmdir_store::precise_timestamp_value(time)).into_owned()
}

/// `attr:<op> value` lines of a modify request (`attr:-` / `attr:=` without values). A
/// modification of one of lmdir's own secrets is its value-less head alone: the log says a
/// bearer token changed, never its value (userPassword's values are kept, as slapd's
/// accesslog keeps them).
fn modification_lines(modifications: &[Modification]) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for modification in modifications {
        let op = match modification.op {
            ModOp::Add => '+',
            ModOp::Delete => '-',
            ModOp::Replace => '=',
            ModOp::Increment => '#',
        };
        let head = format!("{}:{op}", modification.description);
        if modification.values.is_empty() || names_lmdir_secret_attribute(&modification.description)
        {
            lines.push(head.into_bytes());
            continue;
        }
        for value in &modification.values {
            lines.push([head.as_bytes(), b" ", value].concat());
        }
    }
    lines
}

/// `attr:= value` lines of the operational attributes a modify or modrdn stamped, as
/// slapd's accesslog appends them.
fn stamped_lines(txn: &WriteTxn<'_>, change: &Change) -> Result<Vec<Vec<u8>>, LdapError> {
    let entry = txn.owned_entry(change.id)?;
    let mut lines = Vec::new();
    for name in ["entryCSN", "modifiersName", "modifyTimestamp"] {
        for attribute in entry
            .attributes
            .iter()
            .filter(|attribute| attribute.description.eq_ignore_ascii_case(name))
        {
            for value in &attribute.values {
                lines.push([format!("{name}:= ").as_bytes(), value].concat());
            }
        }
    }
    Ok(lines)
}

/// The operational attributes of an add, in the order slapd's accesslog lists them (after
/// the request's own attributes).
const ADDED_OPERATIONAL: [&str; 7] = [
    "structuralObjectClass",
    "entryUUID",
    "creatorsName",
    "createTimestamp",
    "entryCSN",
    "modifiersName",
    "modifyTimestamp",
];

/// Every value of the added entry as stored, `attr:+ value`: the request's attributes, then
/// the operational ones the add stamped. Of lmdir's own secrets, one value-less `attr:+`.
fn added_lines(txn: &WriteTxn<'_>, change: &Change) -> Result<Vec<Vec<u8>>, LdapError> {
    let entry = txn.owned_entry(change.id)?;
    let rank = |description: &str| {
        ADDED_OPERATIONAL
            .iter()
            .position(|name| name.eq_ignore_ascii_case(description))
    };
    let mut attributes: Vec<&lmdir_schema::Attribute> = entry.attributes.iter().collect();
    // Stable: the request's attributes keep their order, first.
    attributes.sort_by_key(|attribute| rank(&attribute.description));
    Ok(attributes
        .iter()
        .flat_map(|attribute| {
            let head = format!("{}:+", attribute.description);
            if names_lmdir_secret_attribute(&attribute.description) {
                return vec![head.into_bytes()];
            }
            attribute
                .values
                .iter()
                .map(|value| [head.as_bytes(), b" ", value].concat())
                .collect()
        })
        .collect())
}

/// The request-specific part of a record: (objectClass, reqType, target DN, extra attributes).
fn request_part(
    txn: &WriteTxn<'_>,
    request: &WriteRequest,
    change: &Change,
) -> Result<Option<(&'static str, &'static str, String, AuditRecord)>, LdapError> {
    let text = |value: &str| vec![value.as_bytes().to_vec()];
    Ok(Some(match request {
        WriteRequest::Add(entry) => (
            "auditAdd",
            "add",
            entry.dn.to_string(),
            vec![("reqMod".into(), added_lines(txn, change)?)],
        ),
        WriteRequest::Delete(dn) => ("auditDelete", "delete", dn.clone(), Vec::new()),
        WriteRequest::Modify(dn, modifications) => {
            let mut lines = modification_lines(modifications);
            lines.extend(stamped_lines(txn, change)?);
            (
                "auditModify",
                "modify",
                dn.clone(),
                vec![("reqMod".into(), lines)],
            )
        }
        WriteRequest::ModifyDn {
            dn,
            new_rdn,
            delete_old_rdn,
            new_superior,
        } => {
            let mut extra: AuditRecord = vec![
                ("reqMod".into(), stamped_lines(txn, change)?),
                ("reqNewRDN".into(), text(new_rdn)),
                (
                    "reqDeleteOldRDN".into(),
                    text(if *delete_old_rdn { "TRUE" } else { "FALSE" }),
                ),
            ];
            if let Some(superior) = new_superior {
                extra.push(("reqNewSuperior".into(), text(superior)));
            }
            // As slapd writes it: the new RDN as given under the normalized superior (the
            // new one, else the target's parent).
            let superior = match new_superior {
                Some(superior) => Some(superior.clone()),
                None => lmdir_schema::Dn::parse(dn)?
                    .parent()
                    .map(|parent| parent.to_string()),
            };
            let superior = superior
                .map(|superior| txn.schema().normalize_dn_str(&superior))
                .transpose()?;
            let new_dn = match superior.filter(|superior| !superior.is_empty()) {
                Some(superior) => format!("{new_rdn},{superior}"),
                None => new_rdn.clone(),
            };
            extra.push(("reqNewDN".into(), text(&new_dn)));
            ("auditModRDN", "modrdn", dn.clone(), extra)
        }
        _ => return Ok(None),
    }))
}

/// The change a request made among those its application recorded: the one of its kind (the
/// others are memberOf upkeep of other entries).
fn own_change<'c>(request: &WriteRequest, changes: &'c [Change]) -> Option<&'c Change> {
    let kind = match request {
        WriteRequest::Add(_) => ChangeKind::Add,
        WriteRequest::Delete(_) => ChangeKind::Delete,
        WriteRequest::Modify(..) => ChangeKind::Modify,
        WriteRequest::ModifyDn { .. } => ChangeKind::ModRdn,
        _ => return None,
    };
    changes.iter().rev().find(|change| change.kind == kind)
}

/// Appends the record of one accepted client write (a no-op for the server's own updates).
pub(crate) fn record(
    txn: &mut WriteTxn<'_>,
    config: &AccesslogConfig,
    request: &WriteRequest,
    requester: &Requester<'_>,
    changes: &[Change],
) -> Result<(), LdapError> {
    let Some(change) = own_change(request, changes) else {
        return Ok(());
    };
    let Some((class, kind, target, extra)) = request_part(txn, request, change)? else {
        return Ok(());
    };
    let key = txn.next_audit_key(micros(requester.received))?;
    let text = |value: String| vec![value.into_bytes()];
    let mut record: AuditRecord = vec![
        ("objectClass".into(), vec![class.as_bytes().to_vec()]),
        ("reqStart".into(), text(generalized_time(key))),
        (
            "reqEnd".into(),
            text(generalized_time(micros(SystemTime::now()).max(key))),
        ),
        ("reqType".into(), text(kind.to_string())),
        ("reqSession".into(), text(requester.session.to_string())),
    ];
    if !requester.identity.dn.is_empty() {
        record.push(("reqAuthzID".into(), text(requester.identity.dn.clone())));
    }
    record.push(("reqDN".into(), text(target)));
    record.push(("reqResult".into(), text("0".to_string())));
    record.extend(extra);
    if let Some(old) = requester
        .old
        .as_ref()
        .and_then(|old| old_part(request, old))
    {
        record.push(("reqOld".into(), old));
    }
    if let Some(uuid) = &change.entry_uuid {
        let hex: String = uuid.iter().map(|byte| format!("{byte:02x}")).collect();
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        record.push(("reqEntryUUID".into(), text(uuid)));
    }
    if let Some(csn) = change.csn {
        record.push(("entryCSN".into(), text(csn.to_string())));
    }
    let oldest = match config.max_age_seconds {
        0 => 0,
        age => micros(SystemTime::now()).saturating_sub(age.saturating_mul(1_000_000)),
    };
    txn.append_audit_record(key, &record, (oldest, config.max_entries))
}
