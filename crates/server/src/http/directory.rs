//! The HTTP side's only way into the directory: LDAP operations built in memory and run through
//! `operations::dispatch`, exactly as a connection runs them (the same access policy, limits,
//! password policy, proxy checks, writer queue, stats log and cn=Monitor counters). An HTTP
//! request is one "connection" in cn=Monitor (listener `https`/`http`) for its lifetime; its
//! results come back as the BER a client would read and are decoded here.

use crate::ber::{tag, BerWriter};
use crate::ber_read::read_tlv;
use crate::client_limits::ClientKey;
use crate::context::{OperationContext, ServerContext};
use crate::controls::Control;
use crate::filter::RawFilter;
use crate::identity::Identity;
use crate::request::{Operation, SearchRequest};
use crate::session::{Session, Transport};
use crate::sink::{Outgoing, ResultSink};
use bytes::BytesMut;
use ldap3_proto::proto::{
    LdapAddRequest, LdapDerefAliases, LdapExtendedRequest, LdapModify, LdapModifyDNRequest,
    LdapModifyRequest, LdapModifyType, LdapOp, LdapPartialAttribute, LdapPasswordModifyRequest,
    LdapSearchScope,
};
use lmdir_schema::Filter;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Most bytes of results one operation may hand back to an HTTP request (past it the
/// operation is stopped and the request answered with adminLimitExceeded).
const COLLECTED_BYTES_MAX: usize = 64 << 20;

/// An LDAP result other than success, as the operation answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapFailure {
    pub code: u32,
    pub message: String,
}

impl LdapFailure {
    pub fn new(code: u32, message: impl Into<String>) -> LdapFailure {
        LdapFailure {
            code,
            message: message.into(),
        }
    }
}

/// One entry of a search result, as sent to a client (only what the subject may read).
#[derive(Debug, Clone, Default)]
pub struct FoundEntry {
    pub dn: String,
    pub attributes: Vec<(String, Vec<Vec<u8>>)>,
}

impl FoundEntry {
    /// The values of `name` (case-insensitive, options ignored).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.attributes
            .iter()
            .filter(move |(description, _)| {
                description
                    .split(';')
                    .next()
                    .is_some_and(|base| base.eq_ignore_ascii_case(name))
            })
            .flat_map(|(_, values)| values.iter().map(Vec::as_slice))
    }

    pub fn first_text(&self, name: &str) -> Option<String> {
        self.values(name)
            .next()
            .map(|value| String::from_utf8_lossy(value).into_owned())
    }
}

/// A search's entries, its result, and its response controls (OID, value).
#[derive(Debug, Default)]
pub struct SearchOutcome {
    pub entries: Vec<FoundEntry>,
    pub controls: Vec<(String, Vec<u8>)>,
}

/// What to search for.
pub struct Search<'a> {
    pub base: &'a str,
    pub scope: LdapSearchScope,
    pub filter: &'a Filter,
    pub attributes: Vec<String>,
    pub size_limit: i32,
    pub controls: Vec<Control>,
}

/// An HTTP request's identity in the directory, and its connection record.
pub struct DirectoryClient {
    server: Arc<ServerContext>,
    session: Session,
    next_message_id: AtomicI32,
    /// The LDAP transaction (RFC 5805) updates are queued in, between `begin` and `commit`.
    transaction: Mutex<Option<Vec<u8>>>,
}

impl Drop for DirectoryClient {
    fn drop(&mut self) {
        self.server
            .monitor
            .connection_closed(self.session.connection_id);
    }
}

impl DirectoryClient {
    /// An anonymous session for a request from `peer`.
    pub fn new(server: &Arc<ServerContext>, peer: SocketAddr, tls: bool) -> DirectoryClient {
        let connection_id = server.connection_counter.fetch_add(1, Ordering::Relaxed) + 1;
        let listener = if tls { "https" } else { "http" };
        let session = Session {
            connection_id,
            identity: Identity::default(),
            // An HTTP request counts as TLS only when it came over TLS (`require_tls`); a
            // loopback plain-http listener is the operator's explicit choice.
            transport: if tls { Transport::Tls } else { Transport::Tcp },
            client: ClientKey::of_ip(peer.ip()),
            tls_active: tls,
            monitor: server
                .monitor
                .connection_opened(connection_id, &peer.to_string(), listener),
            password_must_change: Arc::new(AtomicBool::new(false)),
            // A SCIM write's steps run as one LDAP transaction (RFC 5805), counted in the
            // server-wide `transaction_bytes_max` as a connection's are.
            transactions: Arc::new(crate::transaction_queue::Transactions::new(
                server.transaction_bytes.clone(),
            )),
        };
        DirectoryClient {
            server: server.clone(),
            session,
            next_message_id: AtomicI32::new(1),
            transaction: Mutex::new(None),
        }
    }

    pub fn server(&self) -> &Arc<ServerContext> {
        &self.server
    }

    pub fn identity(&self) -> &Identity {
        &self.session.identity
    }

    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    pub fn client_key(&self) -> ClientKey {
        self.session.client
    }

    /// Runs as `identity` (already authenticated by a bearer token).
    pub fn assume(&mut self, identity: Identity) {
        self.session.monitor.set_authz_dn(&identity.dn);
        self.session.identity = identity;
    }

    /// A simple bind, as an LDAP client's: bind throttle, password policy (lock, expiry,
    /// failures recorded), the stats log. Ok: the session runs as that DN from now on; true
    /// when the password was reset and must be changed before anything else (then, as on an
    /// LDAP connection, `operations::dispatch` refuses every operation but that change).
    pub async fn bind(&mut self, dn: &str, password: &str) -> Result<bool, LdapFailure> {
        let request = crate::request::BindRequest::simple(dn, password.as_bytes());
        let message_id = self.message_id();
        let operation_id = u64::try_from(message_id).unwrap_or(0);
        let response = crate::operations::bind(
            &self.server,
            &mut self.session,
            message_id,
            &request,
            &[],
            operation_id,
        )
        .await;
        let mut decoded = Decoded::default();
        decode_messages(&response, &mut decoded)?;
        let result = decoded
            .result
            .ok_or_else(|| LdapFailure::new(80, "no bind response"))?;
        if result.code != 0 {
            return Err(LdapFailure::new(result.code, result.message));
        }
        if self.session.identity.is_rootdn && self.server.settings().rootpw.is_empty() {
            // Without a rootpw the rootdn's credential is its entry's userPassword (slapd's
            // meaning, kept over LDAP), which whoever may write that entry sets: over HTTP
            // no entry credential becomes the rootdn.
            tracing::warn!(
                "conn={} HTTP sign-in as the rootdn dn=\"{}\" refused: without a rootpw the rootdn is not reached over HTTP",
                self.session.connection_id,
                crate::log_text::escaped(dn)
            );
            self.assume(Identity::default());
            return Err(LdapFailure::new(
                crate::result::code::INVALID_CREDENTIALS,
                "",
            ));
        }
        Ok(self.must_change_password())
    }

    /// Whether only the password change may run (a reset password not changed yet).
    pub fn must_change_password(&self) -> bool {
        self.session.password_must_change.load(Ordering::Acquire)
    }

    /// Marks this session as one whose reset password must be changed first (a console
    /// session signed in that way keeps the restriction across its requests).
    pub fn set_must_change_password(&self, must_change: bool) {
        self.session
            .password_must_change
            .store(must_change, Ordering::Release);
    }

    fn message_id(&self) -> i32 {
        self.next_message_id.fetch_add(1, Ordering::Relaxed)
    }

    pub async fn search(&self, search: Search<'_>) -> Result<SearchOutcome, LdapFailure> {
        let request = SearchRequest {
            base: search.base.to_string(),
            scope: search.scope,
            aliases: LdapDerefAliases::Never,
            sizelimit: search.size_limit,
            timelimit: 0,
            typesonly: false,
            filter: encode_raw_filter(search.filter, self.server.settings().filter_depth_max)?,
            attrs: search.attributes,
        };
        let decoded = self
            .run(Operation::Search(Box::new(request)), search.controls)
            .await?;
        let result = decoded.result.unwrap_or_default();
        let outcome = SearchOutcome {
            entries: decoded.entries,
            controls: result.controls,
        };
        if result.code == 0 {
            Ok(outcome)
        } else {
            Err(LdapFailure::new(result.code, result.message))
        }
    }

    /// Whether the subject may write at least one of `attributes` of the entry at `dn`, decided
    /// as the writer decides a modify's access: a request no write of which could succeed is
    /// refused before its work is done. An entry the subject may not know of fails with 32, as
    /// a missing one.
    pub async fn may_write_some(
        &self,
        dn: &str,
        attributes: Vec<String>,
    ) -> Result<bool, LdapFailure> {
        let server = self.server.clone();
        let identity = self.session.identity.clone();
        let target = dn.to_string();
        let decided = tokio::task::spawn_blocking(move || {
            let database = crate::context::database_of(&server)
                .ok_or_else(|| LdapFailure::new(32, "no database"))?;
            let failure = |error: crate::result::OperationError| {
                LdapFailure::new(error.code, error.message.clone())
            };
            let normalized = database.normalize_dn(&target).map_err(failure)?;
            let read = database
                .store
                .read()
                .map_err(|error| LdapFailure::new(80, error.to_string()))?;
            let groups = database.groups(&read);
            let subject = database.subject(&identity, &groups);
            let (_, entry) =
                crate::entry_read::disclosed_entry(database, &read, &subject, &target, &normalized)
                    .map_err(failure)?;
            let schema = database.schema();
            let policy = database.policy();
            let access = policy.for_entry(&subject, &normalized, &entry);
            Ok(attributes
                .iter()
                .filter_map(|name| schema.attribute(name))
                .any(|attr| access.can_write_attribute(attr)))
        })
        .await;
        decided.map_err(|_| LdapFailure::new(80, "access check failed"))?
    }

    /// The entry at `dn` as the subject may read it (None: missing or hidden, the same).
    pub async fn read(
        &self,
        dn: &str,
        attributes: Vec<String>,
    ) -> Result<Option<FoundEntry>, LdapFailure> {
        let everything = Filter::Present {
            description: "objectClass".to_string(),
        };
        let outcome = self
            .search(Search {
                base: dn,
                scope: LdapSearchScope::Base,
                filter: &everything,
                attributes,
                size_limit: 1,
                controls: Vec::new(),
            })
            .await;
        match outcome {
            Ok(outcome) => Ok(outcome.entries.into_iter().next()),
            Err(failure) if failure.code == 32 => Ok(None),
            Err(failure) => Err(failure),
        }
    }

    pub async fn add(&self, entry: FoundEntry) -> Result<(), LdapFailure> {
        let request = LdapAddRequest {
            dn: entry.dn,
            attributes: entry
                .attributes
                .into_iter()
                .map(|(atype, vals)| LdapPartialAttribute { atype, vals })
                .collect(),
        };
        self.update(LdapOp::AddRequest(request), Vec::new()).await
    }

    /// `changes`: (operation, attribute, values); `assertion`: the change applies only while
    /// it holds on the entry (RFC 4528, decided in the writer's transaction).
    pub async fn modify(
        &self,
        dn: &str,
        changes: Vec<(LdapModifyType, String, Vec<Vec<u8>>)>,
        assertion: Option<&Filter>,
    ) -> Result<(), LdapFailure> {
        self.modify_with(dn, changes, assertion, false).await
    }

    /// A modify under the permissive modify control (see `modify_with`).
    pub async fn modify_permissive(
        &self,
        dn: &str,
        changes: Vec<(LdapModifyType, String, Vec<Vec<u8>>)>,
    ) -> Result<(), LdapFailure> {
        self.modify_with(dn, changes, None, true).await
    }

    /// A modify, under the permissive modify control when `permissive`: adding a present
    /// value or deleting an absent one is skipped, not an error (a SCIM member or email added
    /// twice).
    pub async fn modify_with(
        &self,
        dn: &str,
        changes: Vec<(LdapModifyType, String, Vec<Vec<u8>>)>,
        assertion: Option<&Filter>,
        permissive: bool,
    ) -> Result<(), LdapFailure> {
        let request = LdapModifyRequest {
            dn: dn.to_string(),
            changes: changes
                .into_iter()
                .map(|(operation, atype, vals)| LdapModify {
                    operation,
                    modification: LdapPartialAttribute { atype, vals },
                })
                .collect(),
        };
        let mut controls: Vec<Control> = assertion.map(assertion_control).into_iter().collect();
        if permissive {
            controls.push(Control {
                oid: crate::controls::PERMISSIVE_MODIFY_OID.to_string(),
                critical: false,
                value: None,
            });
        }
        self.update(LdapOp::ModifyRequest(request), controls).await
    }

    pub async fn delete(&self, dn: &str, assertion: Option<&Filter>) -> Result<(), LdapFailure> {
        let controls = assertion.map(assertion_control).into_iter().collect();
        self.update(LdapOp::DelRequest(dn.to_string()), controls)
            .await
    }

    pub async fn rename(
        &self,
        dn: &str,
        new_rdn: &str,
        assertion: Option<&Filter>,
    ) -> Result<(), LdapFailure> {
        let request = LdapModifyDNRequest {
            dn: dn.to_string(),
            newrdn: new_rdn.to_string(),
            deleteoldrdn: true,
            new_superior: None,
        };
        let controls = assertion.map(assertion_control).into_iter().collect();
        self.update(LdapOp::ModifyDNRequest(request), controls)
            .await
    }

    /// Password Modify (RFC 3062): the password policy's checks, history, and hashing.
    pub async fn change_password(
        &self,
        target_dn: &str,
        old_password: Option<&str>,
        new_password: &str,
    ) -> Result<(), LdapFailure> {
        let request = LdapPasswordModifyRequest {
            user_identity: Some(target_dn.to_string()),
            old_password: old_password.map(str::to_string),
            new_password: Some(new_password.to_string()),
        };
        let request: LdapExtendedRequest = request.into();
        self.update(LdapOp::ExtendedRequest(request), Vec::new())
            .await
    }

    fn current_transaction(&self) -> std::sync::MutexGuard<'_, Option<Vec<u8>>> {
        self.transaction
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Starts an LDAP transaction (RFC 5805): the updates until `commit` are queued in it and
    /// applied in one writer transaction, all or none, every decision made there.
    pub async fn begin(&self) -> Result<(), LdapFailure> {
        let request = LdapExtendedRequest {
            name: crate::extensions::TRANSACTION_START_OID.to_string(),
            value: None,
        };
        let decoded = self
            .run(
                Operation::Other(LdapOp::ExtendedRequest(request)),
                Vec::new(),
            )
            .await?;
        let result = decoded.result.unwrap_or_default();
        match (result.code, result.value) {
            (0, Some(id)) => {
                *self.current_transaction() = Some(id);
                Ok(())
            }
            (0, None) => Err(LdapFailure::new(80, "Start Transaction gave no identifier")),
            (code, _) => Err(LdapFailure::new(code, result.message)),
        }
    }

    /// Commits the transaction `begin` started: its updates apply together, or the first
    /// that fails answers for all of them and none is kept.
    pub async fn commit(&self) -> Result<(), LdapFailure> {
        let Some(id) = self.current_transaction().take() else {
            return Ok(());
        };
        let mut value = BytesMut::new();
        let mut writer = BerWriter::new(&mut value);
        writer.open(tag::SEQUENCE);
        writer.octet_string(&id);
        writer.close();
        drop(writer);
        let request = LdapExtendedRequest {
            name: crate::extensions::TRANSACTION_END_OID.to_string(),
            value: Some(value.to_vec()),
        };
        self.update(LdapOp::ExtendedRequest(request), Vec::new())
            .await
    }

    /// Drops the transaction `begin` started, with everything queued in it.
    pub fn abandon(&self) {
        if let Some(id) = self.current_transaction().take() {
            self.session.transactions.abort(&id);
        }
    }

    async fn update(
        &self,
        operation: LdapOp,
        mut controls: Vec<Control>,
    ) -> Result<(), LdapFailure> {
        let queued_in = match &operation {
            LdapOp::ExtendedRequest(_) => None,
            _ => self.current_transaction().clone(),
        };
        if let Some(id) = queued_in {
            controls.push(Control {
                oid: crate::controls::TRANSACTION_SPECIFICATION_OID.to_string(),
                critical: true,
                value: Some(id),
            });
        }
        let decoded = self.run(Operation::Other(operation), controls).await?;
        let result = decoded.result.unwrap_or_default();
        if result.code == 0 {
            Ok(())
        } else {
            Err(LdapFailure::new(result.code, result.message))
        }
    }

    /// Runs one operation through `operations::dispatch` and decodes what it sent.
    async fn run(
        &self,
        operation: Operation,
        controls: Vec<Control>,
    ) -> Result<Decoded, LdapFailure> {
        let (sender, mut receiver) = mpsc::channel(16);
        let cancelled = Arc::new(AtomicBool::new(false));
        let message_id = self.message_id();
        let settings = self.server.settings();
        let prepared = crate::operations::prepare(
            (&self.server, &settings),
            &self.session,
            &operation,
            &controls,
        );
        self.session.monitor.operation_received();
        let context = OperationContext {
            server: self.server.clone(),
            settings,
            session: self.session.clone(),
            message_id,
            operation_id: u64::try_from(message_id).unwrap_or(0),
            controls,
            cancelled: cancelled.clone(),
            sink: ResultSink::new(sender, cancelled.clone()),
        };
        let task = tokio::spawn(Box::pin(crate::operations::dispatch(
            context, operation, prepared,
        )));
        let mut decoded = Decoded::default();
        let mut collected_bytes = 0usize;
        while let Some(outgoing) = receiver.recv().await {
            let bytes = match outgoing {
                Outgoing::Message { bytes, .. } => bytes,
                Outgoing::Done { response, .. } => {
                    decode_messages(&response, &mut decoded)?;
                    break;
                }
            };
            collected_bytes += bytes.len();
            if collected_bytes > COLLECTED_BYTES_MAX {
                cancelled.store(true, Ordering::Release);
                task.abort();
                return Err(LdapFailure::new(
                    11,
                    "the result is too large for one response",
                ));
            }
            decode_messages(&bytes, &mut decoded)?;
        }
        let _ = task.await;
        Ok(decoded)
    }
}

fn assertion_control(filter: &Filter) -> Control {
    let mut value = BytesMut::new();
    crate::filter::write_filter(&mut BerWriter::new(&mut value), filter);
    Control {
        oid: crate::controls::ASSERTION_OID.to_string(),
        critical: true,
        value: Some(value.to_vec()),
    }
}

/// Server-side sort (RFC 2891) on one attribute.
pub fn sort_control(attribute: &str, descending: bool) -> Control {
    let mut value = BytesMut::new();
    let mut writer = BerWriter::new(&mut value);
    writer.open(tag::SEQUENCE);
    writer.open(tag::SEQUENCE);
    writer.octet_string(attribute.as_bytes());
    if descending {
        writer.primitive(0x81, &[0xff]);
    }
    writer.close();
    writer.close();
    drop(writer);
    Control {
        oid: crate::controls::SORT_REQUEST_OID.to_string(),
        critical: true,
        value: Some(value.to_vec()),
    }
}

/// Virtual list view by offset: `after` entries after the one at 1-based `offset`.
pub fn vlv_control(offset: u32, after: u32) -> Control {
    let mut value = BytesMut::new();
    let mut writer = BerWriter::new(&mut value);
    writer.open(tag::SEQUENCE);
    writer.integer(tag::INTEGER, 0);
    writer.integer(tag::INTEGER, i64::from(after));
    writer.open(0xa0);
    writer.integer(tag::INTEGER, i64::from(offset));
    writer.integer(tag::INTEGER, 0);
    writer.close();
    writer.close();
    drop(writer);
    Control {
        oid: crate::controls::VLV_REQUEST_OID.to_string(),
        critical: true,
        value: Some(value.to_vec()),
    }
}

/// The VLV response's (targetPosition, contentCount, result).
pub fn vlv_response(outcome_controls: &[(String, Vec<u8>)]) -> Option<(i64, i64, i64)> {
    let (_, value) = outcome_controls
        .iter()
        .find(|(oid, _)| oid == crate::controls::VLV_RESPONSE_OID)?;
    let (sequence, _) = read_tlv(value)?;
    let items = crate::ber_read::elements(sequence.content)?;
    let number = |index: usize| items.get(index).map(|item| signed(item.content));
    Some((number(0)?, number(1)?, number(2)?))
}

/// `filter` as BER, checked by the same `RawFilter::new` as a client's.
pub fn encode_raw_filter(filter: &Filter, depth_max: usize) -> Result<RawFilter, LdapFailure> {
    let mut bytes = BytesMut::new();
    crate::filter::write_filter(&mut BerWriter::new(&mut bytes), filter);
    RawFilter::new(&bytes, depth_max).ok_or_else(|| LdapFailure::new(2, "the filter is too deep"))
}

#[derive(Debug, Default)]
struct ResultMessage {
    code: u32,
    message: String,
    controls: Vec<(String, Vec<u8>)>,
    /// An extended response's value (responseValue, [11]).
    value: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Decoded {
    entries: Vec<FoundEntry>,
    result: Option<ResultMessage>,
}

fn malformed() -> LdapFailure {
    LdapFailure::new(80, "the server sent a message this client cannot decode")
}

fn signed(content: &[u8]) -> i64 {
    let start = if content.first().is_some_and(|byte| byte & 0x80 != 0) {
        -1i64
    } else {
        0
    };
    content
        .iter()
        .take(8)
        .fold(start, |value, byte| (value << 8) | i64::from(*byte))
}

fn text(content: &[u8]) -> String {
    String::from_utf8_lossy(content).into_owned()
}

/// Decodes the LDAPMessages in `bytes` (one or more, as the sink queues them).
fn decode_messages(mut bytes: &[u8], decoded: &mut Decoded) -> Result<(), LdapFailure> {
    while !bytes.is_empty() {
        let (message, rest) = read_tlv(bytes).ok_or_else(malformed)?;
        bytes = rest;
        let items = crate::ber_read::elements(message.content).ok_or_else(malformed)?;
        let [_, operation, more @ ..] = items.as_slice() else {
            return Err(malformed());
        };
        match operation.tag {
            tag::SEARCH_RESULT_ENTRY => decoded.entries.push(decode_entry(operation.content)?),
            // Search result references and intermediate responses carry nothing SCIM shows.
            0x73 | tag::INTERMEDIATE_RESPONSE => {}
            _ => {
                let fields = crate::ber_read::elements(operation.content).ok_or_else(malformed)?;
                let mut result = ResultMessage {
                    code: fields
                        .first()
                        .map_or(80, |code| signed(code.content) as u32),
                    message: fields
                        .get(2)
                        .map(|field| text(field.content))
                        .unwrap_or_default(),
                    controls: Vec::new(),
                    value: fields
                        .iter()
                        .skip(3)
                        .find(|field| field.tag == 0x8b)
                        .map(|field| field.content.to_vec()),
                };
                if let Some(controls) = more.iter().find(|item| item.tag == tag::CONTROLS) {
                    result.controls = decode_controls(controls.content)?;
                }
                decoded.result = Some(result);
            }
        }
    }
    Ok(())
}

fn decode_controls(content: &[u8]) -> Result<Vec<(String, Vec<u8>)>, LdapFailure> {
    let mut controls = Vec::new();
    for control in crate::ber_read::elements(content).ok_or_else(malformed)? {
        let fields = crate::ber_read::elements(control.content).ok_or_else(malformed)?;
        let oid = fields
            .first()
            .map(|oid| text(oid.content))
            .ok_or_else(malformed)?;
        let value = fields
            .iter()
            .skip(1)
            .find(|field| field.tag == tag::OCTET_STRING)
            .map(|field| field.content.to_vec())
            .unwrap_or_default();
        controls.push((oid, value));
    }
    Ok(controls)
}

fn decode_entry(content: &[u8]) -> Result<FoundEntry, LdapFailure> {
    let fields = crate::ber_read::elements(content).ok_or_else(malformed)?;
    let [dn, attributes] = fields.as_slice() else {
        return Err(malformed());
    };
    let mut entry = FoundEntry {
        dn: text(dn.content),
        attributes: Vec::new(),
    };
    for attribute in crate::ber_read::elements(attributes.content).ok_or_else(malformed)? {
        let parts = crate::ber_read::elements(attribute.content).ok_or_else(malformed)?;
        let [description, values] = parts.as_slice() else {
            return Err(malformed());
        };
        let values = crate::ber_read::elements(values.content)
            .ok_or_else(malformed)?
            .into_iter()
            .map(|value| value.content.to_vec())
            .collect();
        entry.attributes.push((text(description.content), values));
    }
    Ok(entry)
}
