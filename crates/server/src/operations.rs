//! Operation handlers: bind (inline on the connection), and search, compare, updates and extended
//! operations (each in its own task, answering through the connection's outgoing queue).

use crate::ber::{self, tag, ResponseControl, ResultFields};
use crate::context::{OperationContext, ServerContext};
use crate::controls::{self, RequestControls};
use crate::filter::text as filter_text;
use crate::log_text;
use crate::log_text::escaped;
use crate::monitor::OperationKind;
use crate::ppolicy::PolicyError;
use crate::request::{BindCredentials, BindRequest, Operation, SearchRequest};
use crate::result::{code, OperationError};
use crate::rootdse;
use crate::search::{PreparedSearch, SearchDone};
use crate::selection::AttributeSelection;
use crate::session::Session;
use bytes::{Bytes, BytesMut};
use ldap3_proto::proto::{LdapExtendedRequest, LdapOp, LdapSearchScope, OID_PASSWORD_MODIFY};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tracing::info;

impl OperationContext {
    /// `conn=N op=M`, written straight into the log line (no String per line).
    fn log_prefix(&self) -> log_text::OperationPrefix {
        log_text::OperationPrefix {
            connection_id: self.session.connection_id,
            operation_id: self.operation_id,
        }
    }

    async fn send(&self, bytes: Bytes) {
        // A closed receiver means the connection is gone; the operation's work is then moot.
        self.sink.send(bytes).await;
    }

    /// Sends the operation's final response, telling the connection it is done with it (and how
    /// it ended, for a Cancel waiting on it).
    async fn send_final(
        &self,
        response: Bytes,
        response_tag: u8,
        result_code: u32,
        started: Instant,
    ) {
        if let Some(kind) = crate::monitor::OperationKind::from_response_tag(response_tag) {
            self.server
                .monitor
                .operation_completed(kind, result_code, started.elapsed());
        }
        self.session.monitor.operation_completed();
        self.server.monitor.messages_sent(1, 0);
        self.sink.done(self.message_id, result_code, response).await;
    }

    async fn finish(&self, response_tag: u8, result: Result<(), OperationError>, started: Instant) {
        self.finish_with_controls(response_tag, result, started, &[], None)
            .await;
    }

    /// Ends an update: its response carries the pre-/post-read controls on success.
    async fn finish_update(
        &self,
        response_tag: u8,
        result: Result<Vec<ResponseControl>, OperationError>,
        started: Instant,
    ) {
        match result {
            Ok(controls) => {
                self.finish_with_controls(response_tag, Ok(()), started, &controls, None)
                    .await
            }
            Err(error) => {
                // A refused update that named a transaction ends it (`transaction.rs`).
                crate::transaction::abort_named(self);
                self.finish_with_controls(response_tag, Err(error), started, &[], None)
                    .await
            }
        }
    }

    async fn finish_with_controls(
        &self,
        response_tag: u8,
        result: Result<(), OperationError>,
        started: Instant,
        response_controls: &[ResponseControl],
        entries_sent: Option<u64>,
    ) {
        let response_controls = match &result {
            Err(error) if response_controls.is_empty() => error.controls.as_slice(),
            _ => response_controls,
        };
        let (result_code, matched_dn, message, referral) = match &result {
            Ok(()) => (code::SUCCESS, "", "", &[][..]),
            Err(error) => (
                error.code,
                error.matched_dn.as_str(),
                error.message.as_str(),
                error.referral.as_slice(),
            ),
        };
        let mut buffer = BytesMut::with_capacity(32 + matched_dn.len() + message.len());
        ber::write_result_message_with_referral(
            &mut buffer,
            self.message_id,
            response_tag,
            &ResultFields {
                code: result_code,
                matched_dn,
                message,
            },
            referral,
            response_controls,
        );
        info!(
            "{} RESULT tag={} err={}{} duration_us={} text={}",
            self.log_prefix(),
            log_text::Integer(response_tag & 0x1f),
            log_text::Integer(result_code),
            EntriesSent(entries_sent),
            log_text::Integer(started.elapsed().as_micros()),
            log_text::bounded(message, log_text::LOG_FILTER_BYTES_MAX)
        );
        self.send_final(buffer.freeze(), response_tag, result_code, started)
            .await;
    }

    /// Answers `operation` with `error` before it starts.
    async fn refuse(&self, operation: &Operation, error: OperationError, started: Instant) {
        crate::transaction::abort_named(self);
        match response_tag(operation) {
            Some(tag::EXTENDED_RESPONSE) => self.finish_extended(Err(error), started).await,
            Some(response_tag) => self.finish(response_tag, Err(error), started).await,
            None => {}
        }
    }

    async fn finish_extended(
        &self,
        result: Result<(Option<String>, Option<Vec<u8>>), OperationError>,
        started: Instant,
    ) {
        let (result_code, matched_dn, message, name, value) = match &result {
            Ok((name, value)) => (code::SUCCESS, "", "", name.as_deref(), value.as_deref()),
            Err(error) => (
                error.code,
                error.matched_dn.as_str(),
                error.message.as_str(),
                None,
                error.extended_value.as_deref(),
            ),
        };
        let mut buffer = BytesMut::with_capacity(64);
        ber::write_extended_response(
            &mut buffer,
            self.message_id,
            &ResultFields {
                code: result_code,
                matched_dn,
                message,
            },
            name,
            value,
            match &result {
                Err(error) => &error.controls,
                Ok(_) => &[],
            },
        );
        info!(
            "{} RESULT tag=120 err={} duration_us={} text={}",
            self.log_prefix(),
            result_code,
            started.elapsed().as_micros(),
            log_text::bounded(message, log_text::LOG_FILTER_BYTES_MAX)
        );
        self.send_final(
            buffer.freeze(),
            tag::EXTENDED_RESPONSE,
            result_code,
            started,
        )
        .await;
    }
}

/// The response tag (for logs) of an LDAPResult-shaped response to `operation`.
pub fn response_tag(operation: &Operation) -> Option<u8> {
    let operation = match operation {
        Operation::Search(_) => return Some(tag::SEARCH_RESULT_DONE),
        Operation::Bind(_) => return Some(tag::BIND_RESPONSE),
        Operation::NotUtf8(invalid) => return Some(invalid.operation.response_tag()),
        Operation::Other(operation) => operation,
    };
    Some(match operation {
        LdapOp::BindRequest(_) => tag::BIND_RESPONSE,
        LdapOp::ModifyRequest(_) => tag::MODIFY_RESPONSE,
        LdapOp::AddRequest(_) => tag::ADD_RESPONSE,
        LdapOp::DelRequest(_) => tag::DELETE_RESPONSE,
        LdapOp::ModifyDNRequest(_) => tag::MODIFY_DN_RESPONSE,
        LdapOp::CompareRequest(_) => tag::COMPARE_RESPONSE,
        LdapOp::ExtendedRequest(_) => tag::EXTENDED_RESPONSE,
        _ => return None,
    })
}

/// A response refusing `operation` before it starts (e.g. busy); None for operations without a response.
pub fn refusal(message_id: i32, operation: &Operation, error: &OperationError) -> Option<Bytes> {
    let response_tag = response_tag(operation)?;
    let mut buffer = BytesMut::with_capacity(64);
    let fields = ResultFields {
        code: error.code,
        matched_dn: &error.matched_dn,
        message: &error.message,
    };
    if response_tag == tag::EXTENDED_RESPONSE {
        ber::write_extended_response(&mut buffer, message_id, &fields, None, None, &[]);
    } else {
        ber::write_result_message(&mut buffer, message_id, response_tag, &fields, &[]);
    }
    Some(buffer.freeze())
}

/// What the connection learns of an operation before running it (for a search: its filter,
/// converted once, and whether it is small enough to run on the connection's task).
pub struct Prepared {
    /// Boxed: it is hundreds of bytes, and each future it passes through would copy it.
    search: Option<Box<PreparedSearch>>,
    /// A sync search (RFC 4533): a refreshAndPersist one never ends on its own.
    may_persist: bool,
}

impl Prepared {
    /// Whether the connection runs the operation on its own task (microseconds of work). Never
    /// a search that may persist, however small its refresh: on the connection's task it would
    /// stop the connection reading (its Abandon, Cancel, Unbind, a closed socket) for good.
    pub fn runs_inline(&self) -> bool {
        !self.may_persist && self.search.as_ref().is_some_and(|search| search.small)
    }
}

/// Prepares an operation as the connection receives it.
pub fn prepare(
    (server, settings): (&ServerContext, &crate::settings::ServerSettings),
    session: &Session,
    operation: &Operation,
    request_controls: &[controls::Control],
) -> Prepared {
    // A session `require_authentication` or `require_tls_for_reads` refuses gets no work done
    // for it (no candidates).
    let identity = &session.identity;
    let refused = (settings.require_authentication && identity.dn.is_empty())
        || tls_required_first(settings, session);
    let search = match operation {
        Operation::Search(request) if !refused => Some(Box::new(PreparedSearch::new(
            (server, settings),
            identity,
            request,
        ))),
        _ => None,
    };
    let may_persist = request_controls
        .iter()
        .any(|control| control.oid == lmdir_sync::messages::SYNC_REQUEST_OID);
    Prepared {
        search,
        may_persist,
    }
}

/// `require_tls_for_reads` refuses every operation reaching `dispatch` on this session until
/// TLS is on (ldapi counts as secure).
fn tls_required_first(settings: &crate::settings::ServerSettings, session: &Session) -> bool {
    settings.require_tls_for_reads && !session.is_secure()
}

/// Runs one non-bind operation to completion.
pub async fn dispatch(mut context: OperationContext, operation: Operation, mut prepared: Prepared) {
    let started = Instant::now();
    if let Operation::NotUtf8(invalid) = &operation {
        let text = format!("the {} is not UTF-8", invalid.field);
        info!("{} refused: {text}", context.log_prefix());
        let refusal = OperationError::new(invalid.result_code(), text);
        return context.refuse(&operation, refusal, started).await;
    }
    if tls_required_first(&context.settings, &context.session) {
        info!(
            "{} refused: TLS required (require_tls_for_reads)",
            context.log_prefix()
        );
        let refusal = OperationError::new(code::CONFIDENTIALITY_REQUIRED, "TLS is required");
        return context.refuse(&operation, refusal, started).await;
    }
    if let Some(refusal) = authentication_refusal(&context, &operation) {
        info!(
            "{} refused: authentication required (require_authentication)",
            context.log_prefix()
        );
        return context.refuse(&operation, refusal, started).await;
    }
    if context.session.password_must_change.load(Ordering::Acquire) {
        if let Some(refusal) = change_after_reset_refusal(&context, &operation) {
            if let Some(response_tag) = response_tag(&operation) {
                info!(
                    "{} refused: the password must be changed first",
                    context.log_prefix()
                );
                context.finish(response_tag, Err(refusal), started).await;
            }
            return;
        }
    }
    // Proxied authorization (RFC 4370) chooses the identity the whole operation runs with.
    let proxied = context
        .controls
        .iter()
        .any(|control| control.oid == crate::proxy_authz::PROXY_AUTHZ_OID);
    if let Err(error) = crate::proxy_authz::assume_identity(&mut context).await {
        return context.refuse(&operation, error, started).await;
    }
    if proxied {
        // The search was prepared (candidates, estimate) for the bound identity, not the
        // proxied one it now runs as: prepare it again for the right subject.
        prepared.search = None;
    }
    let operation = match operation {
        Operation::Search(request) => {
            let prepared = prepared.search.unwrap_or_else(|| {
                Box::new(PreparedSearch::new(
                    (&context.server, &context.settings),
                    &context.session.identity,
                    &request,
                ))
            });
            return search(&context, &request, prepared, started).await;
        }
        Operation::NotUtf8(_) | Operation::Bind(_) => {
            // Never here: answered above; the connection runs binds itself, in order (`bind`).
            context
                .sink
                .done(context.message_id, code::PROTOCOL_ERROR, Bytes::new())
                .await;
            return;
        }
        Operation::Other(operation) => operation,
    };
    match operation {
        LdapOp::ExtendedRequest(request) => extended(&context, &request, started).await,
        LdapOp::CompareRequest(request) => {
            info!(
                "{} CMP dn=\"{}\" attr=\"{}\"",
                context.log_prefix(),
                log_text::bounded(&request.dn, log_text::LOG_DN_BYTES_MAX),
                log_text::bounded(&request.atype, log_text::LOG_DN_BYTES_MAX)
            );
            let result = crate::compare::compare(&context, &request).await;
            let response = match result {
                Ok(true) => Err(OperationError::new(code::COMPARE_TRUE, "")),
                Ok(false) => Err(OperationError::new(code::COMPARE_FALSE, "")),
                Err(error) => Err(error),
            };
            context
                .finish(tag::COMPARE_RESPONSE, response, started)
                .await;
        }
        LdapOp::AddRequest(request) => {
            info!(
                "{} ADD dn=\"{}\"",
                context.log_prefix(),
                log_text::bounded(&request.dn, log_text::LOG_DN_BYTES_MAX)
            );
            let result = crate::update::add(&context, request).await;
            context
                .finish_update(tag::ADD_RESPONSE, result, started)
                .await;
        }
        LdapOp::DelRequest(dn) => {
            info!(
                "{} DEL dn=\"{}\"",
                context.log_prefix(),
                log_text::bounded(&dn, log_text::LOG_DN_BYTES_MAX)
            );
            let result = crate::update::delete(&context, &dn).await;
            context
                .finish_update(tag::DELETE_RESPONSE, result, started)
                .await;
        }
        LdapOp::ModifyRequest(request) => {
            info!(
                "{} MOD dn=\"{}\"",
                context.log_prefix(),
                log_text::bounded(&request.dn, log_text::LOG_DN_BYTES_MAX)
            );
            let result = crate::update::modify(&context, request).await;
            context
                .finish_update(tag::MODIFY_RESPONSE, result, started)
                .await;
        }
        LdapOp::ModifyDNRequest(request) => {
            info!(
                "{} MODRDN dn=\"{}\" newrdn=\"{}\" deleteoldrdn={} newsuperior=\"{}\"",
                context.log_prefix(),
                log_text::bounded(&request.dn, log_text::LOG_DN_BYTES_MAX),
                log_text::bounded(&request.newrdn, log_text::LOG_DN_BYTES_MAX),
                request.deleteoldrdn,
                log_text::bounded(
                    request.new_superior.as_deref().unwrap_or(""),
                    log_text::LOG_DN_BYTES_MAX
                )
            );
            let result = crate::update::modify_dn(&context, request).await;
            context
                .finish_update(tag::MODIFY_DN_RESPONSE, result, started)
                .await;
        }
        other => {
            // Responses sent by a client, intermediate responses: not requests.
            info!(
                "{} unexpected PDU from client: {:?}",
                context.log_prefix(),
                std::mem::discriminant(&other)
            );
            context
                .sink
                .done(context.message_id, code::PROTOCOL_ERROR, Bytes::new())
                .await;
        }
    }
}

/// The refusal of `operation` from a session that has not bound while `require_authentication`
/// is set (slapd's `require authc`), as slapd 2.5 answers: updates strongerAuthRequired (8,
/// slapd checks `allow update_anon` first), Password Modify its own anonymous refusal, every
/// other operation unwillingToPerform (53) — searches of the root DSE and cn=Subschema and Who
/// am I? included. Bind, StartTLS, Cancel, Abandon and Unbind never reach `dispatch`.
fn authentication_refusal(
    context: &OperationContext,
    operation: &Operation,
) -> Option<OperationError> {
    if !context.settings.require_authentication || !context.session.identity.dn.is_empty() {
        return None;
    }
    match operation {
        Operation::Other(
            LdapOp::AddRequest(_)
            | LdapOp::DelRequest(_)
            | LdapOp::ModifyRequest(_)
            | LdapOp::ModifyDNRequest(_),
        ) => Some(OperationError::new(
            code::STRONG_AUTH_REQUIRED,
            "modifications require authentication",
        )),
        Operation::Other(LdapOp::ExtendedRequest(request))
            if request.name == OID_PASSWORD_MODIFY =>
        {
            None
        }
        _ => Some(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "authentication required",
        )),
    }
}

/// The refusal of `operation` on a connection whose reset password must be changed first.
fn change_after_reset_refusal(
    context: &OperationContext,
    operation: &Operation,
) -> Option<OperationError> {
    let wants_control = context
        .controls
        .iter()
        .any(|control| control.oid == crate::ppolicy::PASSWORD_POLICY_OID);
    crate::ppolicy::change_after_reset_refusal(
        operation,
        |request| crate::password::changes_only_password(&context.server, request),
        wants_control,
    )
}

/// Bind (RFC 4511 §4.2, RFC 4513): returns the encoded response; updates the session identity.
pub async fn bind(
    server: &Arc<ServerContext>,
    session: &mut Session,
    message_id: i32,
    request: &BindRequest,
    request_controls: &[controls::Control],
    operation_id: u64,
) -> Bytes {
    let started = Instant::now();
    let method = match &request.credentials {
        BindCredentials::Simple(_) => "128".to_string(),
        BindCredentials::Sasl { mechanism, .. } => format!("163 mech={}", escaped(mechanism)),
        BindCredentials::Unsupported => "unsupported".to_string(),
    };
    info!(
        "conn={} op={} BIND dn=\"{}\" method={}",
        session.connection_id,
        operation_id,
        log_text::bounded(
            &String::from_utf8_lossy(&request.name),
            log_text::LOG_DN_BYTES_MAX
        ),
        log_text::bounded(&method, log_text::LOG_DN_BYTES_MAX)
    );
    // A failed or new bind leaves the connection anonymous (RFC 4511 §4.2.1), and updates
    // queued in a transaction under the old identity never commit under another.
    session.identity = crate::identity::Identity::default();
    session.transactions.abort_all();
    let mut policy_response = None;
    let mut wants_policy = false;
    let outcome = match controls::parse(request_controls, controls::OperationClass::Bind) {
        Err(error) => Err(error),
        Ok(parsed) => {
            wants_policy = parsed.password_policy;
            // The settings the whole bind runs with, taken once.
            let settings = server.settings();
            crate::password::bind_outcome(server, &settings, session, request, &mut policy_response)
                .await
        }
    };
    // draft-behera §6: the response control answers a request control only.
    let response_controls: Vec<ResponseControl> = policy_response
        .filter(|_| wants_policy)
        .map(|response| response.control())
        .into_iter()
        .collect();
    let must_change = outcome.is_ok()
        && policy_response.is_some_and(|said| said.error == Some(PolicyError::ChangeAfterReset));
    session
        .password_must_change
        .store(must_change, Ordering::Release);
    let result = match outcome {
        Ok(identity) => {
            session.identity = identity;
            Ok(())
        }
        Err(error) => Err(error),
    };
    let (result_code, message) = match &result {
        Ok(()) => (code::SUCCESS, String::new()),
        Err(error) => (error.code, error.message.clone()),
    };
    info!(
        "conn={} op={} RESULT tag=97 err={} duration_us={} text={}",
        session.connection_id,
        operation_id,
        result_code,
        started.elapsed().as_micros(),
        log_text::bounded(&message, log_text::LOG_FILTER_BYTES_MAX)
    );
    server
        .monitor
        .operation_completed(OperationKind::Bind, result_code, started.elapsed());
    session.monitor.operation_completed();
    session.monitor.set_authz_dn(&session.identity.dn);
    let mut buffer = BytesMut::with_capacity(32 + message.len());
    ber::write_result_message(
        &mut buffer,
        message_id,
        tag::BIND_RESPONSE,
        &ResultFields {
            code: result_code,
            matched_dn: "",
            message: &message,
        },
        &response_controls,
    );
    buffer.freeze()
}

async fn search(
    context: &OperationContext,
    request: &SearchRequest,
    prepared: Box<PreparedSearch>,
    started: Instant,
) {
    info!(
        "{} SRCH base=\"{}\" scope={} deref={} filter=\"{}\" attrs=\"{}\"",
        context.log_prefix(),
        log_text::bounded(&request.base, log_text::LOG_DN_BYTES_MAX),
        log_text::Integer(request.scope.clone() as i64),
        log_text::Integer(request.aliases.clone() as i64),
        search_log_filter(&request.filter),
        log_text::bounded(&request.attrs.join(" "), log_text::LOG_ATTRIBUTES_BYTES_MAX)
    );
    let result = match search_request_within_limits(&context.settings, request) {
        Err(error) => Err(error),
        Ok(()) => match controls::parse(&context.controls, controls::OperationClass::Search) {
            Err(error) => Err(error),
            Ok(parsed) => search_with_controls(context, request, &parsed, prepared).await,
        },
    };
    match result {
        Ok(done) => {
            context
                .server
                .monitor
                .messages_sent(done.entries_sent, done.entries_sent);
            context
                .finish_with_controls(
                    tag::SEARCH_RESULT_DONE,
                    done.result,
                    started,
                    &done.response_controls,
                    Some(done.entries_sent),
                )
                .await
        }
        Err(error) => {
            context
                .finish_with_controls(tag::SEARCH_RESULT_DONE, Err(error), started, &[], Some(0))
                .await
        }
    }
}

/// The search filter as the stats log shows it: password values redacted, bounded, escaped.
/// Built only where the line is logged, and escaped straight into the line.
pub fn search_log_filter(filter: &crate::filter::RawFilter) -> LogFilter {
    LogFilter(filter_text::to_log_string(
        filter,
        log_text::LOG_FILTER_BYTES_MAX,
    ))
}

/// A filter written for the log (see `search_log_filter`).
pub struct LogFilter(String);

impl std::fmt::Display for LogFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The writer stops near the bound itself (it ends a cut filter with `...`); `bounded`
        // escapes what it wrote.
        log_text::bounded(&self.0, log_text::LOG_FILTER_BYTES_MAX + 8).fmt(formatter)
    }
}

/// ` nentries=N` after a search's result code; nothing for other operations.
struct EntriesSent(Option<u64>);

impl std::fmt::Display for EntriesSent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(entries) => write!(formatter, " nentries={}", log_text::Integer(entries)),
            None => Ok(()),
        }
    }
}

/// The limit a search request must meet before any work besides its filter's (nesting and
/// items, checked as the filter is decoded): the length of the attribute list
/// (adminLimitExceeded, as OpenLDAP answers its limits).
pub fn search_request_within_limits(
    settings: &crate::settings::ServerSettings,
    request: &SearchRequest,
) -> Result<(), OperationError> {
    crate::selection::attribute_list_within_limits(settings, request.attrs.len())
}

async fn search_with_controls(
    context: &OperationContext,
    request: &SearchRequest,
    request_controls: &RequestControls,
    prepared: Box<PreparedSearch>,
) -> Result<SearchDone, OperationError> {
    let selection = AttributeSelection::from_request(&request.attrs);
    if request.base.is_empty() && request.scope == LdapSearchScope::Base {
        let server = &context.server;
        let database_schema = server.database.as_ref().map(|database| database.schema());
        let schema = database_schema
            .as_deref()
            .unwrap_or(lmdir_schema::Schema::builtin_shared());
        let mut prepared = prepared;
        let filter = prepared.take_filter(schema, &context.settings, request)?;
        let entry = rootdse::root_dse(server);
        let matches = rootdse::matches(&entry, schema, &filter);
        let mut entries_sent = 0;
        if matches {
            let mut buffer = BytesMut::with_capacity(1024);
            rootdse::write_entry(
                &mut buffer,
                context.message_id,
                &entry,
                &selection,
                request.typesonly,
            );
            context.send(buffer.freeze()).await;
            entries_sent = 1;
        }
        return Ok(SearchDone {
            result: Ok(()),
            entries_sent,
            response_controls: Vec::new(),
        });
    }
    crate::search::search(context, request, request_controls, &selection, prepared).await
}

async fn extended(context: &OperationContext, request: &LdapExtendedRequest, started: Instant) {
    info!(
        "{} EXT oid={}",
        context.log_prefix(),
        escaped(&request.name)
    );
    use crate::extensions::Extension;
    let extension = crate::extensions::lookup(
        &request.name,
        context.server.has_database(),
        context.server.tls_config.is_some(),
    );
    let result = match controls::parse(&context.controls, controls::OperationClass::Extended) {
        Err(error) => Err(error),
        Ok(_) => match extension {
            Some(Extension::WhoAmI) => {
                let identity = &context.session.identity;
                let authzid = if identity.dn.is_empty() {
                    String::new()
                } else {
                    format!("dn:{}", identity.dn)
                };
                Ok((None, Some(authzid.into_bytes())))
            }
            Some(Extension::PasswordModify) => {
                crate::password::password_modify(context, request).await
            }
            Some(Extension::StartTransaction) => match request.value {
                Some(_) => Err(OperationError::new(
                    code::PROTOCOL_ERROR,
                    "Start Transaction has no request value",
                )),
                // Queued updates hold server memory until their transaction ends: only an
                // identity that authenticated may hold any (as slapd answers anonymous updates).
                None if context.session.identity.dn.is_empty() => Err(OperationError::new(
                    code::STRONG_AUTH_REQUIRED,
                    "LDAP transactions need an authenticated identity: bind first",
                )),
                None => context
                    .session
                    .transactions
                    .start()
                    .map(|id| (None, Some(id))),
            },
            Some(Extension::EndTransaction) => {
                crate::transaction::end(context, request.value.as_deref())
                    .await
                    .map(|value| (None, value))
            }
            // Cancel and StartTLS are answered by the connection before dispatch.
            Some(Extension::Cancel | Extension::StartTls) | None => Err(OperationError::new(
                code::PROTOCOL_ERROR,
                format!("unsupported extended operation {}", request.name),
            )),
        },
    };
    context.finish_extended(result, started).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::tests::encode;
    use lmdir_schema::Filter;

    fn equality(description: &str, value: &str) -> Filter {
        Filter::Equality {
            description: description.to_string(),
            value: value.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_search_log_redacts_passwords_and_bounds_and_escapes_the_filter() {
        let password = encode(&Filter::And(vec![
            equality("uid", "bob"),
            equality("userPassword;x", "secret"),
            Filter::Approx {
                description: "2.5.4.35".to_string(),
                value: b"secret".to_vec(),
            },
        ]));
        assert_eq!(
            search_log_filter(&password).to_string(),
            "(&(uid=bob)(userPassword;x=<redacted>)(2.5.4.35~=<redacted>))"
        );
        // A value cannot break the line or close the quotes of `filter="..."`.
        let forged = encode(&equality("cn", "x\"\nconn=1 op=1 BIND"));
        let logged = search_log_filter(&forged).to_string();
        assert!(!logged.contains('\n') && !logged.contains('"'), "{logged}");
        // 16 MiB of filter logs as about LOG_FILTER_BYTES_MAX.
        let huge = encode(&equality("cn", &"y".repeat(16 << 20)));
        let logged = search_log_filter(&huge).to_string();
        assert!(
            logged.len() < log_text::LOG_FILTER_BYTES_MAX + 32,
            "{}",
            logged.len()
        );
        assert!(logged.ends_with("yyy..."), "{logged}");
    }
}
