//! Reloading the configuration file into a running server (SIGHUP): everything is checked
//! first, so an invalid file changes nothing; then what can change live is swapped in (schema
//! additions, server limits and settings, `[[access]]`, `[[limits]]`) and new indexes are
//! built in the background, used by searches only once built. The schema files are read
//! again: new definitions are added live; a change or removal of a running definition refuses
//! the whole reload, like an invalid file. What needs a restart keeps its running value
//! and is named. Open connections stay: each operation takes the settings and policy of the
//! moment it starts.

pub use crate::config_identity::ConfigIdentity;
use crate::context::ServerContext;
use crate::limits::IdentityLimits;
use crate::settings::ServerSettings;
use lmdir_access::acl::AccessPolicy;
use lmdir_config::{Config, ReplicationConfig};
use lmdir_schema::Schema;
use std::sync::Arc;
use tracing::{error, info, warn};

/// Everything a reload swaps in, built and checked before anything changes.
struct Prepared {
    /// The running schema extended by what the schema files add (None: they add nothing).
    schema: Option<Arc<Schema>>,
    settings: ServerSettings,
    policy: Option<AccessPolicy>,
    limits: Option<IdentityLimits>,
    indexes: Option<lmdir_store::IndexesAdded>,
    restart_needed: Vec<&'static str>,
}

/// The keys whose change needs a restart, in the order they are named, each with whether it
/// differs between `running` and `fresh`.
fn restart_only_changes(running: &Config, fresh: &Config) -> Vec<&'static str> {
    let (server, database) = (&fresh.server, &fresh.database);
    let (was, was_database) = (&running.server, &running.database);
    let changed = [
        ("server.listen", server.listen != was.listen),
        (
            "server.metrics_listen",
            server.metrics_listen != was.metrics_listen,
        ),
        ("server.ldapi_mode", server.ldapi_mode != was.ldapi_mode),
        // The HTTP listener (SCIM, console) is set up once, when the server starts.
        ("http", fresh.http != running.http),
        (
            "server.tls_certificate/tls_key (the files at the running paths are re-read)",
            server.tls_certificate != was.tls_certificate || server.tls_key != was.tls_key,
        ),
        (
            "server.bind_failure_*",
            (
                server.bind_failure_burst,
                server.bind_failure_interval_milliseconds,
            ) != (
                was.bind_failure_burst,
                was.bind_failure_interval_milliseconds,
            ) || (
                server.bind_failure_address_burst,
                server.bind_failure_address_interval_milliseconds,
            ) != (
                was.bind_failure_address_burst,
                was.bind_failure_address_interval_milliseconds,
            ),
        ),
        ("database.suffix", database.suffix != was_database.suffix),
        (
            "database.directory",
            database.directory != was_database.directory,
        ),
        ("database.rootdn", database.rootdn != was_database.rootdn),
        ("database.sync", database.sync != was_database.sync),
        (
            "database.memberof",
            database.memberof != was_database.memberof,
        ),
        (
            "database.map_size_bytes",
            database.map_size_bytes != was_database.map_size_bytes,
        ),
        (
            "replication (other than its consumers)",
            ReplicationConfig {
                consumer: running.replication.consumer.clone(),
                ..fresh.replication.clone()
            } != running.replication,
        ),
        (
            "replication.consumer (a change between read-only replica and not)",
            replica_shape_changes(running, fresh),
        ),
    ];
    changed
        .into_iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| name)
        .collect()
}

/// Whether `fresh`'s consumers would turn a read-only replica into a writable server or back
/// (client writes referred or not): that needs a restart, and the consumers stay as running.
fn replica_shape_changes(running: &Config, fresh: &Config) -> bool {
    fresh.replication.is_read_only_replica() != running.replication.is_read_only_replica()
}

/// The running schema extended by what `fresh`'s schema files add, None when they add
/// nothing; an error (the files do not load, or change or remove a running definition) names
/// each offending definition and what differs.
fn schema_additions(running: &Schema, fresh: &Config) -> Result<Option<Arc<Schema>>, String> {
    let loaded = crate::context::schema_from_config(fresh)
        .map_err(|problem| format!("schema_files: {problem}"))?;
    let extended = running.extended_by(&loaded).map_err(|problems| {
        format!(
            "schema_files change or remove running definitions (only additions apply \
             live; restart to change them): {}",
            problems.join("; ")
        )
    })?;
    let grew = extended.attribute_type_count() > running.attribute_type_count()
        || extended.object_classes().count() > running.object_classes().count()
        || extended.ldap_syntaxes().count() > running.ldap_syntaxes().count();
    Ok(grew.then(|| Arc::new(extended)))
}

/// The attribute types, object classes and syntaxes `extended` adds to `running`, for the log.
fn added_names(running: &Schema, extended: &Schema) -> String {
    let attributes = extended
        .attribute_types()
        .skip(running.attribute_type_count())
        .map(|(_, added)| format!("attribute type {}", added.name()));
    let classes = extended
        .object_classes()
        .skip(running.object_classes().count())
        .map(|(_, added)| format!("object class {}", added.name()));
    let syntaxes = extended
        .ldap_syntaxes()
        .skip(running.ldap_syntaxes().count())
        .map(|added| format!("ldapSyntax {added}"));
    attributes
        .chain(classes)
        .chain(syntaxes)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds and checks what `fresh` would swap in; an error names the first problem.
fn prepare(context: &ServerContext, running: &Config, fresh: &Config) -> Result<Prepared, String> {
    let mut settings = ServerSettings::from_config(fresh)?;
    let now = context.settings();
    // What needs a restart keeps its running value.
    settings.listen.clone_from(&now.listen);
    settings.metrics_listen = now.metrics_listen;
    settings.ldapi_mode = now.ldapi_mode;
    settings.http.clone_from(&now.http);
    settings.tls_certificate.clone_from(&now.tls_certificate);
    settings.tls_key.clone_from(&now.tls_key);
    settings.suffix.clone_from(&now.suffix);
    settings.rootdn.clone_from(&now.rootdn);
    settings.replication.clone_from(&now.replication);
    if !replica_shape_changes(running, fresh) {
        // Consumers added, removed or changed are started and stopped live (`reload`).
        settings
            .replication
            .consumer
            .clone_from(&fresh.replication.consumer);
    }
    settings.update_referral.clone_from(&now.update_referral);
    let (schema, policy, limits, indexes) = match &context.database {
        Some(database) => {
            let running_schema = database.schema();
            let extended = schema_additions(&running_schema, fresh)?;
            let schema = extended.as_ref().unwrap_or(&running_schema);
            let policy = AccessPolicy::from_config(
                &fresh.access,
                schema,
                &settings.suffix,
                &settings.rootdn,
            )
            .map_err(|problem| format!("[[access]]: {problem}"))?;
            let limits = IdentityLimits::compile(&fresh.limits, schema)
                .map_err(|problem| format!("[[limits]]: {problem}"))?;
            let wanted = lmdir_store::StoreOptions::from_config(fresh).indexes;
            let indexes = database
                .store
                .index_additions(&wanted, schema)
                .map_err(|problem| format!("[database.index]: {problem}"))?;
            (extended, Some(policy), Some(limits), Some(indexes))
        }
        None => (None, None, None, None),
    };
    Ok(Prepared {
        schema,
        settings,
        policy,
        limits,
        indexes,
        restart_needed: restart_only_changes(running, fresh),
    })
}

/// Applies `fresh` (read from the file `identity` names) to the running server. On an error
/// nothing changed and the message says why. Index builds continue in the background after
/// this returns (logged when done). The caller logs which configuration is live (after it
/// applied the new log settings).
pub fn reload(
    context: &Arc<ServerContext>,
    running: &Config,
    fresh: &Config,
    identity: ConfigIdentity,
) -> Result<(), String> {
    let prepared = prepare(context, running, fresh)?;
    if let (Some(database), Some(extended)) = (&context.database, &prepared.schema) {
        // First: everything after it may name the new definitions.
        let added = added_names(&database.schema(), extended);
        database
            .store
            .extend_schema(extended.clone())
            .map_err(|problem| format!("schema: {problem}"))?;
        *database
            .schema_extended_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(std::time::SystemTime::now());
        info!("reload: schema extended live: {added}");
    }
    for name in &prepared.restart_needed {
        warn!("reload: {name} changed; it needs a restart, the running value stays");
    }
    let consumers = prepared.settings.replication.consumer.clone();
    context.settings_live.store(Arc::new(prepared.settings));
    let (stopped, started) = crate::replication::consumer::reconcile(context, &consumers);
    if !stopped.is_empty() || !started.is_empty() {
        info!("reload: replication consumers stopped {stopped:?}, started {started:?}");
    }
    if let Some(database) = &context.database {
        if let Some(policy) = prepared.policy {
            database.live_policy.store(Arc::new(policy));
        }
        if let Some(limits) = prepared.limits {
            database.limits.store(Arc::new(limits));
        }
        database.set_accesslog(&fresh.accesslog);
        if let Some(indexes) = prepared.indexes {
            build_indexes(database.store.clone(), fresh, indexes);
        }
    }
    context.set_config_identity(identity);
    Ok(())
}

/// Starts building the indexes `fresh` adds on a thread of its own (writes wait for its one
/// transaction; searches go on and use the new kinds from its commit on).
fn build_indexes(store: lmdir_store::Store, fresh: &Config, planned: lmdir_store::IndexesAdded) {
    if !planned.kept.is_empty() {
        warn!(
            "reload: index kinds no longer configured stay maintained and used until a \
             restart: {}",
            planned.kept.join(" ")
        );
    }
    if planned.built.is_empty() {
        return;
    }
    info!(
        "reload: building indexes in the background: {}",
        planned.built.join(" ")
    );
    let wanted = lmdir_store::StoreOptions::from_config(fresh).indexes;
    let spawned = std::thread::Builder::new()
        .name("lmdir-index-build".to_string())
        .spawn(move || {
            let started = std::time::Instant::now();
            match store.add_indexes(&wanted) {
                Ok(done) => info!(
                    "reload: indexes built and in use: {} ({} entries, {} ms)",
                    done.built.join(" "),
                    done.entries,
                    started.elapsed().as_millis()
                ),
                Err(problem) => error!("reload: building the new indexes failed: {problem}"),
            }
        });
    if let Err(problem) = spawned {
        error!("reload: cannot start the index build: {problem}");
    }
}
