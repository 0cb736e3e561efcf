//! Search: one request in one read txn, filtered and returned as the subject may see it
//! (restricted filters, candidate filters, hidden bases answering as missing), sorted and paged
//! within bounds, on the connection's task when the index says it is small.

use super::*;

/// Most entries one sorted search may hold in memory.
const SORTED_ENTRIES_MAX: usize = 100_000;

/// A usable sort key: attribute, rule giving the order, direction.
struct PlannedSortKey {
    attr: AttrId,
    rule: Option<lmdir_schema::MatchingRule>,
    reverse: bool,
}

/// Resolves sort keys, or the RFC 2891 result code (and attribute) explaining why not.
fn plan_sort(
    schema: &Schema,
    keys: &[crate::controls::SortKey],
) -> Result<Vec<PlannedSortKey>, (u32, String)> {
    keys.iter()
        .map(|key| {
            let attr = schema
                .attribute(&key.attribute)
                .ok_or((code::NO_SUCH_ATTRIBUTE, key.attribute.clone()))?;
            let rule = match &key.ordering_rule {
                Some(name) => Some(
                    lmdir_schema::MatchingRule::by_name_or_oid(name)
                        .ok_or((code::INAPPROPRIATE_MATCHING, key.attribute.clone()))?,
                ),
                None => schema.attribute_type(attr).ordering,
            };
            Ok(PlannedSortKey {
                attr,
                rule,
                reverse: key.reverse,
            })
        })
        .collect()
}

/// Per key, the value an entry sorts by: the smallest (largest when reversed) of its values
/// in the key's order; None when the entry lacks the attribute or the subject may not read it
/// there (a hidden attribute sorts as an absent one, so the order reveals none of its values).
fn sort_values(
    entry: &lmdir_store::EntryRef<'_>,
    keys: &[PlannedSortKey],
    access: &EntryAccess<'_>,
) -> Vec<Option<Vec<u8>>> {
    keys.iter()
        .map(|key| {
            if !access.can_read_attribute(key.attr) {
                return None;
            }
            let candidates = entry
                .values_of(key.attr)
                .into_iter()
                .map(|(_, normalized)| match key.rule {
                    Some(rule) => rule.ordering_key(&normalized),
                    None => normalized.to_vec(),
                });
            if key.reverse {
                candidates.max()
            } else {
                candidates.min()
            }
        })
        .collect()
}

/// RFC 2891: entries without a sort attribute sort after all others, in either direction.
fn compare_sort_values(
    keys: &[PlannedSortKey],
    left: &[Option<Vec<u8>>],
    right: &[Option<Vec<u8>>],
) -> std::cmp::Ordering {
    use std::cmp::Ordering as Order;
    for ((key, left), right) in keys.iter().zip(left).zip(right) {
        let order = match (left, right) {
            (Some(left), Some(right)) => {
                let natural = left.cmp(right);
                if key.reverse {
                    natural.reverse()
                } else {
                    natural
                }
            }
            (Some(_), None) => Order::Less,
            (None, Some(_)) => Order::Greater,
            (None, None) => Order::Equal,
        };
        if order != Order::Equal {
            return order;
        }
    }
    Order::Equal
}

/// SortResult ::= SEQUENCE { sortResult ENUMERATED, attributeType [0] AttributeDescription OPTIONAL }
fn sort_response_control(plan: &Result<Vec<PlannedSortKey>, (u32, String)>) -> ResponseControl {
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    match plan {
        Ok(_) => writer.integer(crate::ber::tag::ENUMERATED, 0),
        Err((result_code, attribute)) => {
            writer.integer(crate::ber::tag::ENUMERATED, i64::from(*result_code));
            if !attribute.is_empty() {
                writer.primitive(0x80, attribute.as_bytes());
            }
        }
    }
    writer.close();
    drop(writer);
    ResponseControl {
        oid: crate::controls::SORT_RESPONSE_OID.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }
}

/// SHA-256 of what must stay the same between pages (RFC 2696 §3): the connection, base,
/// scope, filter, attributes, size limit and sort keys (a sorted search's cookie holds a
/// position in the sorted order, not an entry ID).
fn request_fingerprint(
    request: &LdapSearchRequest,
    sort: Option<&[crate::controls::SortKey]>,
    connection_id: u64,
) -> [u8; 32] {
    use sha2::Digest;
    let text = format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{:?}\u{0}{}\u{0}{}\u{0}{:?}",
        connection_id,
        request.base,
        request.scope.clone() as i64,
        crate::filter_text::to_string(&request.filter),
        request.attrs,
        request.sizelimit,
        request.typesonly,
        sort
    );
    sha2::Sha256::digest(text.as_bytes()).into()
}

fn paged_response_control(cookie: &[u8]) -> ResponseControl {
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    writer.integer(crate::ber::tag::INTEGER, 0);
    writer.octet_string(cookie);
    writer.close();
    drop(writer);
    ResponseControl {
        oid: crate::controls::PAGED_RESULTS_OID.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }
}

pub(super) fn scope_of(scope: &LdapSearchScope) -> Result<Scope, OperationError> {
    match scope {
        LdapSearchScope::Base => Ok(Scope::Base),
        LdapSearchScope::OneLevel => Ok(Scope::One),
        LdapSearchScope::Subtree => Ok(Scope::Sub),
        LdapSearchScope::Children => Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "subordinate (children) scope is not supported",
        )),
    }
}

fn subschema_search(
    context: &OperationContext,
    database: &Database,
    request: &LdapSearchRequest,
    selection: &AttributeSelection,
) -> Option<Result<(BytesMut, u64), OperationError>> {
    let normalized = database.normalize_dn(&request.base).ok()?;
    if normalized != "cn=subschema" {
        return None;
    }
    if request.scope != LdapSearchScope::Base {
        return Some(Ok((BytesMut::new(), 0)));
    }
    let mut entry = database.schema.subschema_entry();
    for attribute in &mut entry.attributes {
        if attribute.description == "objectClasses"
            && database
                .schema
                .object_class(crate::rootdse::ROOT_DSE_OBJECT_CLASS)
                .is_none()
        {
            let definition = crate::rootdse::ROOT_DSE_OBJECT_CLASS_DEFINITION;
            attribute.values.push(definition.as_bytes().to_vec());
        }
    }
    // The schema is loaded when the server starts and changes only with a restart: admin tools
    // refresh their cached copy when modifyTimestamp is newer than what they hold.
    let loaded = lmdir_store::timestamp_value(context.server.monitor.started());
    for name in ["createTimestamp", "modifyTimestamp"] {
        entry.attributes.push(lmdir_schema::Attribute {
            description: name.to_string(),
            values: vec![loaded.clone()],
        });
    }
    let view = match OwnedEntryView::new(&database.schema, &entry) {
        Ok(view) => view,
        Err(error) => return Some(Err(error.into())),
    };
    let filter = match Filter::parse(
        &crate::filter_text::to_string(&request.filter),
        context.server.settings.filter_depth_max,
    ) {
        Ok(filter) => filter,
        Err(error) => return Some(Err(error.into())),
    };
    if !database
        .schema
        .prepare_filter(&filter)
        .evaluate(&view)
        .is_true()
    {
        return Some(Ok((BytesMut::new(), 0)));
    }
    let resolved = Selection::resolve(&database.schema, selection);
    let mut buffer = BytesMut::with_capacity(256 * 1024);
    let mut writer = EntryWriter::begin(&mut buffer, context.message_id, b"cn=Subschema");
    for attribute in &entry.attributes {
        let Some(attr) = database.schema.attribute(&attribute.description) else {
            continue;
        };
        // The subschema's schema attributes are operational; objectClass and cn are user ones.
        if !resolved.selects(&database.schema, attr, &[]) {
            continue;
        }
        if request.typesonly {
            writer.attribute(attribute.description.as_bytes(), std::iter::empty());
        } else {
            writer.attribute(
                attribute.description.as_bytes(),
                attribute.values.iter().map(Vec::as_slice),
            );
        }
    }
    writer.finish(&[]);
    Some(Ok((buffer, 1)))
}

pub async fn search(
    context: &OperationContext,
    request: &LdapSearchRequest,
    controls: &RequestControls,
    selection: &AttributeSelection,
) -> Result<SearchDone, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(&request.base));
    };
    let special = subschema_search(context, database, request, selection)
        .or_else(|| super::monitor_search::monitor_search(context, database, request, selection));
    if let Some(result) = special {
        let (buffer, count) = result?;
        if count > 0 {
            let _ = context
                .sender
                .send(Outgoing::Message(buffer.freeze()))
                .await;
        }
        return Ok(SearchDone {
            result: Ok(()),
            entries_sent: count,
            response_controls: Vec::new(),
        });
    }
    let server = context.server.clone();
    let job = SearchJob {
        request: request.clone(),
        controls: controls.clone(),
        selection: selection.clone(),
        identity: context.session.identity.clone(),
        message_id: context.message_id,
        connection_id: context.session.connection_id,
        cancelled: context.cancelled.clone(),
    };
    let sender = context.sender.clone();
    if context.small_search {
        // Few candidates: run on this task; a hop to the blocking pool and back would cost
        // more than the search (two thread wake-ups per operation on a busy server).
        let mut chunks = Vec::new();
        let database = database_of(&server).expect("database present");
        let done = job.run(database, &server.settings, &mut |chunk| {
            chunks.push(chunk);
            true
        });
        for chunk in chunks {
            if sender.send(Outgoing::Message(chunk)).await.is_err() {
                return Err(OperationError::new(code::OTHER, "connection closed"));
            }
        }
        return done;
    }
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        job.run(database, &server.settings, &mut |chunk| {
            sender.blocking_send(Outgoing::Message(chunk)).is_ok()
        })
    })
    .await
    .map_err(internal)?
}

/// One search request with what it needs from its connection, run in one read txn.
struct SearchJob {
    request: LdapSearchRequest,
    controls: RequestControls,
    selection: AttributeSelection,
    identity: Identity,
    message_id: i32,
    connection_id: u64,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

/// A sink takes each chunk of encoded entries; false means the connection is gone.
type ChunkSink<'a> = dyn FnMut(bytes::Bytes) -> bool + 'a;

/// Where a paged search stands, from its cookie.
struct PageRequest {
    size: u64,
    /// The last entry ID sent (unsorted) or the position reached in the sorted order.
    resume: Option<u32>,
    /// Entries the earlier pages of this paged search returned (the size limit is a total).
    sent_before: u64,
}

/// Entries sorted so far: each one's sort values and ID, and the bytes they hold.
#[derive(Default)]
struct SortBuffer {
    entries: Vec<(Vec<Option<Vec<u8>>>, lmdir_store::EntryId)>,
    bytes: usize,
}

/// Bytes one sorted entry holds besides its key values (its row and one slot per key).
fn sort_entry_overhead_bytes(key_count: usize) -> usize {
    std::mem::size_of::<(Vec<Option<Vec<u8>>>, lmdir_store::EntryId)>()
        + key_count * std::mem::size_of::<Option<Vec<u8>>>()
}

impl SortBuffer {
    /// Adds one entry, or adminLimitExceeded past the entry or byte bound.
    fn push(
        &mut self,
        values: Vec<Option<Vec<u8>>>,
        id: lmdir_store::EntryId,
        bytes_max: usize,
    ) -> Result<(), OperationError> {
        if self.entries.len() >= SORTED_ENTRIES_MAX {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("more than {SORTED_ENTRIES_MAX} entries to sort"),
            ));
        }
        self.bytes += sort_entry_overhead_bytes(values.len())
            + values.iter().flatten().map(Vec::len).sum::<usize>();
        if self.bytes > bytes_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("sort keys of this search exceed {bytes_max} bytes"),
            ));
        }
        self.entries.push((values, id));
        Ok(())
    }
}

/// The size and time limits of a search: the client's, capped by the subject's (`[[limits]]` or
/// the server's; none for the rootdn); a paged search's size limit is its total over all pages.
/// 0 / zero = unlimited.
fn search_limits(
    effective: &crate::limits::EffectiveLimits,
    request: &LdapSearchRequest,
    paged: bool,
) -> (u64, std::time::Duration) {
    let requested = u64::try_from(request.sizelimit.max(0)).unwrap_or(0);
    let configured = if paged {
        effective.paged_total
    } else {
        effective.size
    };
    let size_limit = match (requested, configured) {
        (0, limit) | (limit, 0) => limit,
        (requested, configured) => requested.min(configured),
    };
    let requested =
        std::time::Duration::from_secs(u64::try_from(request.timelimit.max(0)).unwrap_or(0));
    let configured = effective.time;
    let time_limit = match (requested.is_zero(), configured.is_zero()) {
        (true, _) => configured,
        (_, true) => requested,
        _ => requested.min(configured),
    };
    (size_limit, time_limit)
}

/// A client filter (search or assertion) within the configured bounds, parsed.
pub(super) fn parse_client_filter(
    settings: &crate::settings::ServerSettings,
    filter: &ldap3_proto::proto::LdapFilter,
) -> Result<Filter, OperationError> {
    crate::operations::filter_within_limits(settings, filter)?;
    Ok(Filter::parse(
        &crate::filter_text::to_string(filter),
        settings.filter_depth_max,
    )?)
}

/// RFC 4528 on a read (search base, compare): the assertion holds when it is True with the
/// items the subject may not search Undefined, so hidden values answer exactly as absent ones.
pub(super) fn check_read_assertion(
    database: &Database,
    settings: &crate::settings::ServerSettings,
    access: &EntryAccess<'_>,
    entry: &lmdir_store::EntryRef<'_>,
    assertion: &ldap3_proto::proto::LdapFilter,
) -> Result<(), OperationError> {
    let assertion = parse_client_filter(settings, assertion)?;
    let prepared = database.schema.prepare_filter(&assertion);
    if access.restrict_filter(&prepared).evaluate(entry).is_true() {
        Ok(())
    } else {
        Err(OperationError::new(
            code::ASSERTION_FAILED,
            "assertion control failed",
        ))
    }
}

/// The entry at `dn` (normalized: `normalized`) if the subject may know of it. A missing entry
/// and a hidden one answer the same noSuchObject, whose matched DN is the deepest ancestor the
/// subject may know of (OpenLDAP's `disclose`), so neither the result code, the message nor
/// the matched DN tells them apart.
pub(super) fn disclosed_entry<'txn>(
    database: &Database,
    read: &'txn ReadTxn,
    subject: &Subject<'_>,
    dn: &str,
    normalized: &str,
) -> Result<(lmdir_store::EntryId, lmdir_store::EntryRef<'txn>), OperationError> {
    let (mut ancestor, found) = match read.dn_to_id(normalized) {
        Ok(id) => (
            read.parent_of(id)?,
            read.entry(id)?.map(|entry| (id, entry)),
        ),
        Err(error) if error.code == lmdir_schema::ResultCode::NoSuchObject => {
            let deepest = match &error.matched_dn {
                Some(matched) => read.dn_to_id(matched).ok(),
                None => None,
            };
            (deepest, None)
        }
        Err(error) => return Err(error.into()),
    };
    if let Some((id, entry)) = found {
        if database
            .policy
            .for_entry(subject, normalized, &entry)
            .can_disclose_entry()
        {
            return Ok((id, entry));
        }
    }
    let mut missing = OperationError::new(
        code::NO_SUCH_OBJECT,
        // The DN as the client gave it (so hidden and missing read alike), cut: a 16 MiB DN
        // is not echoed back whole.
        format!("no such entry '{}'", crate::log_text::bounded(dn, 256)),
    );
    while let Some(id) = ancestor.filter(|id| *id != 0) {
        if let Some(entry) = read.entry(id)? {
            let ancestor_ndn = read.normalized_dn_of(id)?;
            if database
                .policy
                .for_entry(subject, &ancestor_ndn, &entry)
                .can_disclose_entry()
            {
                missing.matched_dn = read.dn_of(id)?;
                break;
            }
        }
        ancestor = read.parent_of(id)?;
    }
    Err(missing)
}

impl SearchJob {
    /// The sort keys, resolved (or why they cannot be used); more than `sort_keys_max` is
    /// adminLimitExceeded before anything is read.
    #[allow(clippy::type_complexity)]
    fn sort_plan(
        &self,
        database: &Database,
        settings: &crate::settings::ServerSettings,
    ) -> Result<Option<Result<Vec<PlannedSortKey>, (u32, String)>>, OperationError> {
        match &self.controls.sort {
            Some(keys) if keys.len() > settings.sort_keys_max => Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("more than {} sort keys", settings.sort_keys_max),
            )),
            Some(keys) => Ok(Some(plan_sort(&database.schema, keys))),
            None => Ok(None),
        }
    }

    fn run(
        &self,
        database: &Database,
        settings: &crate::settings::ServerSettings,
        sink: &mut ChunkSink<'_>,
    ) -> Result<SearchDone, OperationError> {
        let started = Instant::now();
        let request = &self.request;
        let scope = scope_of(&request.scope)?;
        let prepared = database
            .schema
            .prepare_filter(&parse_client_filter(settings, &request.filter)?);
        let read = database.store.read().map_err(internal)?;
        let groups = database.groups(&read);
        let subject = database.subject(&self.identity, &groups);
        let effective = database.limits_of(settings, &subject);
        let normalized_base = database.normalize_dn(&request.base)?;
        let (_, base_entry) =
            disclosed_entry(database, &read, &subject, &request.base, &normalized_base)?;
        if let Some(assertion) = &self.controls.assertion {
            // The assertion control applies to the base entry (RFC 4528 §3).
            let access = database
                .policy
                .for_entry(&subject, &normalized_base, &base_entry);
            check_read_assertion(database, settings, &access, &base_entry, assertion)?;
        }
        let sort_plan = self.sort_plan(database, settings)?;
        // RFC 2891 §2: a critical sort that cannot be done fails the search.
        if let (Some(Err((result_code, attribute))), true) =
            (&sort_plan, self.controls.sort_critical)
        {
            return Err(OperationError::new(
                code::UNAVAILABLE_CRITICAL_EXTENSION,
                format!(
                    "critical sort control: cannot sort by {attribute} (result code {result_code})"
                ),
            ));
        }
        let fingerprint =
            request_fingerprint(request, self.controls.sort.as_deref(), self.connection_id);
        let page = match &self.controls.paged {
            None => None,
            // Size 0 abandons the paged search (RFC 2696 §3).
            Some((0, _)) => {
                return Ok(SearchDone {
                    result: Ok(()),
                    entries_sent: 0,
                    response_controls: vec![paged_response_control(&[])],
                })
            }
            // Pages bigger than `page_size` (OpenLDAP size.pr) are served at that size.
            Some((size, cookie)) => {
                let size = match i64::try_from(effective.page_size) {
                    Ok(page_size) if page_size > 0 => (*size).min(page_size),
                    _ => *size,
                };
                Some(database.open_cookie(&fingerprint, size, cookie)?)
            }
        };
        // Index candidates and the store's own test use only what the subject may search
        // everywhere: hidden values feed neither timing nor the look-through count.
        let subject_access = database
            .policy
            .for_subject_within(&subject, &normalized_base);
        let spec = SearchSpec {
            base: normalized_base,
            scope,
            filter: subject_access.candidate_filter(&prepared).into_owned(),
            size_limit: 0,
            lookthrough_limit: usize::try_from(effective.lookthrough).unwrap_or(usize::MAX),
        };
        let mut output = SearchOutput {
            job: self,
            database,
            read: &read,
            subordinates: Subordinates::new(database, &read, &subject),
            selection: Selection::resolve(&database.schema, &self.selection),
            buffer: BytesMut::with_capacity(SEARCH_CHUNK_BYTES + 4096),
            sink,
            sent: 0,
        };
        let visible = VisibleEntries {
            database,
            read: &read,
            subject: &subject,
            prepared: &prepared,
            is_root: self.identity.is_rootdn,
        };
        let (size, time) = search_limits(&effective, request, page.is_some());
        let limits = SearchLimits {
            size,
            deadline: (!time.is_zero()).then(|| started + time),
        };
        let mut done = match &sort_plan {
            Some(Ok(keys)) => self.run_sorted(
                settings,
                &spec,
                &visible,
                keys,
                &limits,
                page.as_ref(),
                &fingerprint,
                &mut output,
            )?,
            _ => self.run_unsorted(
                &spec,
                &visible,
                &limits,
                page.as_ref(),
                &fingerprint,
                &mut output,
            )?,
        };
        if !output.buffer.is_empty() {
            (output.sink)(output.buffer.split().freeze());
        }
        if let Some(plan) = &sort_plan {
            done.response_controls.push(sort_response_control(plan));
        }
        Ok(done)
    }
}

/// A search's size limit (0 = none) and when its time runs out.
struct SearchLimits {
    size: u64,
    deadline: Option<Instant>,
}

/// Decides which stored entries a subject gets back from a search.
struct VisibleEntries<'a> {
    database: &'a Database,
    read: &'a ReadTxn,
    subject: &'a Subject<'a>,
    prepared: &'a lmdir_schema::PreparedFilter,
    is_root: bool,
}

impl<'a> VisibleEntries<'a> {
    /// The subject's access to an entry the store found, when the entry is returned: the
    /// subject may search and read it and the filter, with the items it may not search there
    /// Undefined, is True.
    fn access(
        &self,
        id: lmdir_store::EntryId,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> Result<Option<EntryAccess<'a>>, OperationError> {
        if self.is_root {
            // The rootdn's access ignores the DN: skip the parent walk.
            return Ok(Some(self.database.policy.for_entry(
                self.subject,
                "",
                entry,
            )));
        }
        let normalized_dn = self.read.normalized_dn_of(id)?;
        let access = self
            .database
            .policy
            .for_entry(self.subject, &normalized_dn, entry);
        if !access.can_search_entry() || !access.can_read_entry() {
            return Ok(None);
        }
        if !access
            .restrict_filter(self.prepared)
            .evaluate(entry)
            .is_true()
        {
            return Ok(None);
        }
        Ok(Some(access))
    }
}

/// Encodes returned entries into chunks for the connection.
struct SearchOutput<'a, 'sink> {
    job: &'a SearchJob,
    database: &'a Database,
    read: &'a ReadTxn,
    subordinates: Subordinates<'a>,
    selection: Selection,
    buffer: BytesMut,
    sink: &'a mut ChunkSink<'sink>,
    sent: u64,
}

impl SearchOutput<'_, '_> {
    fn emit(
        &mut self,
        id: lmdir_store::EntryId,
        entry: &lmdir_store::EntryRef<'_>,
        access: &EntryAccess<'_>,
    ) -> Result<(), OperationError> {
        let dn = self.read.dn_of(id)?;
        write_stored_entry(
            &mut self.buffer,
            self.job.message_id,
            &self.database.schema,
            &self.subordinates,
            id,
            entry,
            &dn,
            &self.selection,
            Some(access),
            self.job.request.typesonly,
        )?;
        self.sent += 1;
        if self.buffer.len() >= SEARCH_CHUNK_BYTES && !(self.sink)(self.buffer.split().freeze()) {
            return Err(OperationError::new(code::OTHER, "connection closed"));
        }
        Ok(())
    }
}

/// The SearchResultDone of a search that may be paged: the cookie (if paged) as its control.
fn search_done(
    result: Result<(), OperationError>,
    entries_sent: u64,
    cookie: Option<Vec<u8>>,
) -> SearchDone {
    SearchDone {
        result,
        entries_sent,
        response_controls: cookie
            .map(|cookie| vec![paged_response_control(&cookie)])
            .unwrap_or_default(),
    }
}

impl SearchJob {
    /// Why the search must stop now, if it must: abandoned / cancelled, or past its time.
    /// Asked between returned entries and, by the store, between examined candidates.
    fn stop_reason(&self, limits: &SearchLimits) -> Option<LdapError> {
        if self.cancelled.load(Ordering::Acquire) {
            return Some(LdapError::new(
                lmdir_schema::ResultCode::Canceled,
                "abandoned",
            ));
        }
        if limits
            .deadline
            .is_some_and(|deadline| Instant::now() > deadline)
        {
            return Some(LdapError::new(
                lmdir_schema::ResultCode::TimeLimitExceeded,
                "time limit exceeded",
            ));
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn run_unsorted(
        &self,
        spec: &SearchSpec,
        visible: &VisibleEntries<'_>,
        limits: &SearchLimits,
        page: Option<&PageRequest>,
        fingerprint: &[u8; 32],
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let sent_before = page.map_or(0, |page| page.sent_before);
        let mut cursor = visible
            .read
            .search(spec)?
            .stop_when(|| self.stop_reason(limits));
        if let Some(last) = page.and_then(|page| page.resume) {
            cursor = cursor.resume_after(last);
        }
        let mut cookie = page.map(|_| Vec::new());
        let mut result = Ok(());
        for item in cursor {
            if let Some(stop) = self.stop_reason(limits) {
                result = Err(stop.into());
                break;
            }
            let (id, entry) = match item {
                Ok(found) => found,
                Err(error) => {
                    result = Err(error.into());
                    break;
                }
            };
            let Some(access) = visible.access(id, &entry)? else {
                continue;
            };
            // The size limit counts every page of a paged search (the cookie carries the count).
            if limits.size > 0 && sent_before + output.sent >= limits.size {
                result = Err(OperationError::new(
                    code::SIZE_LIMIT_EXCEEDED,
                    "size limit exceeded",
                ));
                break;
            }
            if let Some(page) = page {
                if output.sent == page.size {
                    let total = sent_before + output.sent;
                    cookie = Some(visible.database.seal_cookie(
                        fingerprint,
                        id.saturating_sub(1),
                        total,
                    ));
                    break;
                }
            }
            output.emit(id, &entry, &access)?;
        }
        Ok(search_done(result, output.sent, cookie))
    }

    /// Sorting needs the whole result. A sorted search pages through the sorted order, so its
    /// cookie holds a position there rather than the last ID sent.
    #[allow(clippy::too_many_arguments)]
    fn run_sorted(
        &self,
        settings: &crate::settings::ServerSettings,
        spec: &SearchSpec,
        visible: &VisibleEntries<'_>,
        keys: &[PlannedSortKey],
        limits: &SearchLimits,
        page: Option<&PageRequest>,
        fingerprint: &[u8; 32],
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let mut sorted = SortBuffer::default();
        let cursor = visible
            .read
            .search(spec)?
            .stop_when(|| self.stop_reason(limits));
        for item in cursor {
            if let Some(stop) = self.stop_reason(limits) {
                return Ok(search_done(Err(stop.into()), 0, page.map(|_| Vec::new())));
            }
            let (id, entry) = match item {
                Ok(found) => found,
                Err(error) => {
                    return Ok(search_done(Err(error.into()), 0, page.map(|_| Vec::new())))
                }
            };
            if let Some(access) = visible.access(id, &entry)? {
                sorted.push(
                    sort_values(&entry, keys, &access),
                    id,
                    settings.sort_bytes_max,
                )?;
            }
        }
        // Stable: equal keys keep ID order, so pages of a sorted search do not overlap.
        sorted
            .entries
            .sort_by(|(left, _), (right, _)| compare_sort_values(keys, left, right));
        let total = sorted.entries.len();
        let start = page
            .and_then(|page| page.resume)
            .map_or(0, |position| position as usize)
            .min(total);
        let mut end = total;
        let mut cookie = page.map(|_| Vec::new());
        if let Some(page) = page {
            let page_end = start.saturating_add(usize::try_from(page.size).unwrap_or(usize::MAX));
            if page_end < end {
                end = page_end;
                cookie = Some(
                    visible
                        .database
                        .seal_cookie(fingerprint, end as u32, end as u64),
                );
            }
        }
        // The size limit counts positions in sorted order, across all pages (RFC 2891: sort,
        // then return).
        let mut result = Ok(());
        let size_limit = usize::try_from(limits.size).unwrap_or(usize::MAX);
        if size_limit > 0 && end > size_limit {
            end = size_limit.max(start);
            cookie = cookie.map(|_| Vec::new());
            result = Err(OperationError::new(
                code::SIZE_LIMIT_EXCEEDED,
                "size limit exceeded",
            ));
        }
        for (_, id) in &sorted.entries[start..end] {
            let Some(entry) = visible.read.entry(*id)? else {
                continue;
            };
            if let Some(access) = visible.access(*id, &entry)? {
                output.emit(*id, &entry, &access)?;
            }
        }
        Ok(search_done(result, output.sent, cookie))
    }
}

/// Bytes of a paged-results cookie's keyed hash.
const COOKIE_TAG_BYTES: usize = 16;
/// A cookie: resume point (u32 BE), entries sent so far (u64 BE), tag.
const COOKIE_BYTES: usize = 4 + 8 + COOKIE_TAG_BYTES;

impl Database {
    fn cookie_tag(&self, fingerprint: &[u8; 32], resume: u32, sent: u64) -> [u8; COOKIE_TAG_BYTES] {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.cookie_key);
        hash.update(fingerprint);
        hash.update(resume.to_be_bytes());
        hash.update(sent.to_be_bytes());
        let digest = hash.finalize();
        let mut tag = [0u8; COOKIE_TAG_BYTES];
        tag.copy_from_slice(&digest[..COOKIE_TAG_BYTES]);
        tag
    }

    /// A paged-results cookie for this request (`fingerprint`): where the next page resumes and
    /// how many entries the paged search has returned, under a tag keyed by a secret of this
    /// server, so a client can neither reset the count nor move the cookie to another search
    /// or connection. The server keeps no paged-search state at all.
    fn seal_cookie(&self, fingerprint: &[u8; 32], resume: u32, sent: u64) -> Vec<u8> {
        let mut cookie = Vec::with_capacity(COOKIE_BYTES);
        cookie.extend_from_slice(&resume.to_be_bytes());
        cookie.extend_from_slice(&sent.to_be_bytes());
        cookie.extend_from_slice(&self.cookie_tag(fingerprint, resume, sent));
        cookie
    }

    /// The page a paged-results control asks for (an empty cookie starts the search).
    fn open_cookie(
        &self,
        fingerprint: &[u8; 32],
        size: i64,
        cookie: &[u8],
    ) -> Result<PageRequest, OperationError> {
        let size = u64::try_from(size).unwrap_or(0);
        if cookie.is_empty() {
            return Ok(PageRequest {
                size,
                resume: None,
                sent_before: 0,
            });
        }
        let foreign = || {
            OperationError::new(
                code::UNWILLING_TO_PERFORM,
                "paged results cookie does not belong to this search",
            )
        };
        if cookie.len() != COOKIE_BYTES {
            return Err(foreign());
        }
        let resume = u32::from_be_bytes(cookie[0..4].try_into().map_err(|_| foreign())?);
        let sent = u64::from_be_bytes(cookie[4..12].try_into().map_err(|_| foreign())?);
        let expected = self.cookie_tag(fingerprint, resume, sent);
        // Every byte compared whatever the first difference, so timing tells nothing.
        let difference = expected
            .iter()
            .zip(&cookie[12..])
            .fold(0u8, |difference, (left, right)| difference | (left ^ right));
        if difference != 0 {
            return Err(foreign());
        }
        Ok(PageRequest {
            size,
            resume: Some(resume),
            sent_before: sent,
        })
    }
}

/// Most index candidates a search may have to run on the async task instead of the blocking
/// pool: small enough that it finishes in microseconds and never stalls other clients.
const INLINE_SEARCH_CANDIDATES_MAX: u64 = 16;

/// Most filter items (leaves plus substring pieces) a search may have to be considered for the
/// async task: deciding reads one posting header per item, and a big filter is never small.
const INLINE_SEARCH_FILTER_ITEMS_MAX: usize = 64;
/// Most bytes of names and values a search's filter may have to be considered for the async
/// task: parsing and normalizing it there must take microseconds.
const INLINE_SEARCH_FILTER_BYTES_MAX: usize = 4096;

/// Whether a search of this server's database by `identity` is small enough to run on the
/// connection's task (see `search_is_small`).
pub fn search_is_small_for(
    server: &ServerContext,
    identity: &Identity,
    request: &LdapSearchRequest,
) -> bool {
    database_of(server).is_some_and(|database| {
        search_is_small(
            database,
            identity,
            request,
            server.settings.filter_depth_max,
        )
    })
}

/// Whether a search is known, from posting headers alone, to examine at most
/// `INLINE_SEARCH_CANDIDATES_MAX` entries. Sorting, paging and any doubt answer false. The
/// estimate reads only the items the subject may search everywhere (as the search itself), so
/// which thread runs a search does not depend on hidden values.
fn search_is_small(
    database: &Database,
    identity: &Identity,
    request: &LdapSearchRequest,
    filter_depth_max: usize,
) -> bool {
    if matches!(request.scope, LdapSearchScope::Base) {
        return true;
    }
    if crate::filter_text::item_count(&request.filter, INLINE_SEARCH_FILTER_ITEMS_MAX)
        > INLINE_SEARCH_FILTER_ITEMS_MAX
        || crate::filter_text::text_bytes(&request.filter, INLINE_SEARCH_FILTER_BYTES_MAX)
            > INLINE_SEARCH_FILTER_BYTES_MAX
        || crate::filter_text::depth(&request.filter) > filter_depth_max
    {
        return false;
    }
    let Ok(filter) = Filter::parse(
        &crate::filter_text::to_string(&request.filter),
        filter_depth_max,
    ) else {
        return false;
    };
    let prepared = database.schema.prepare_filter(&filter);
    let Ok(read) = database.store.read() else {
        return false;
    };
    let Ok(normalized_base) = database.normalize_dn(&request.base) else {
        return false;
    };
    let groups = database.groups(&read);
    let subject = database.subject(identity, &groups);
    let subject_access = database
        .policy
        .for_subject_within(&subject, &normalized_base);
    let candidates = subject_access.candidate_filter(&prepared);
    matches!(
        read.estimated_candidate_count(&candidates),
        Ok(Some(count)) if count <= INLINE_SEARCH_CANDIDATES_MAX
    )
}
