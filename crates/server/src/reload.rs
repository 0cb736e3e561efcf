//! Reloading the configuration file into a running server (SIGHUP): everything is checked
//! first, so an invalid file changes nothing; then what can change live is swapped in (schema
//! additions, server limits and settings, `[[access]]`, `[[limits]]`, `[integrity]`,
//! `[[dynlist]]`, each rule compiled against the schema first) and new indexes are
//! built in the background, used by searches only once built. The schema files are read
//! again: new definitions are added live; a change or removal of a running definition refuses
//! the whole reload, like an invalid file. What needs a restart keeps its running value
//! and is named. Open connections stay: each operation takes the settings and policy of the
//! moment it starts, swapped as one (`rules::Running`); each request read takes the request
//! size limits of the moment (`connection::pdu_codec`), while `idle_timeout_seconds`,
//! `write_timeout_seconds` and `running_operations_per_connection_max` are a connection's
//! from when it opened.

pub use crate::config_identity::ConfigIdentity;
use crate::context::{Rules, Running, ServerContext};
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
    /// The database's rules (None without a database).
    rules: Option<Rules>,
    indexes: Option<lmdir_store::IndexesAdded>,
    restart_needed: Vec<&'static str>,
    /// What runs once this is applied (`kept_running`).
    config: Config,
}

/// How a key that needs a restart keeps its running value: `(next, running, fresh)`, where
/// `next` starts as `fresh` and becomes what runs.
type Keep = fn(&mut Config, &Config, &Config);

/// The keys whose change needs a restart, in the order they are named, each with how it keeps
/// its running value. One table for both the restart log (`restart_only_changes`) and what
/// runs (`kept_running`), so the two never disagree.
const RESTART_ONLY: &[(&str, Keep)] = &[
    ("server.listen", |next, running, _| {
        next.server.listen.clone_from(&running.server.listen);
    }),
    ("server.metrics_listen", |next, running, _| {
        next.server
            .metrics_listen
            .clone_from(&running.server.metrics_listen);
    }),
    ("server.ldapi_mode", |next, running, _| {
        next.server
            .ldapi_mode
            .clone_from(&running.server.ldapi_mode);
    }),
    // The log's destination and shape are set up once, when the server starts; a reload
    // applies `log` (the filter) and reopens the file at the running path.
    (
        "server.log_file (the file at the running path is reopened)",
        |next, running, _| {
            next.server.log_file.clone_from(&running.server.log_file);
        },
    ),
    ("server.log_format", |next, running, _| {
        next.server.log_format = running.server.log_format;
    }),
    // The HTTP listener (SCIM, console) is set up once, when the server starts.
    ("http", |next, running, _| {
        next.http.clone_from(&running.http)
    }),
    (
        "server.tls_certificate/tls_key (the files at the running paths are re-read)",
        |next, running, _| {
            next.server
                .tls_certificate
                .clone_from(&running.server.tls_certificate);
            next.server.tls_key.clone_from(&running.server.tls_key);
        },
    ),
    ("server.bind_failure_*", |next, running, _| {
        let (server, was) = (&mut next.server, &running.server);
        server.bind_failure_burst = was.bind_failure_burst;
        server.bind_failure_interval_milliseconds = was.bind_failure_interval_milliseconds;
        server.bind_failure_address_burst = was.bind_failure_address_burst;
        server.bind_failure_address_interval_milliseconds =
            was.bind_failure_address_interval_milliseconds;
    }),
    ("database.suffix", |next, running, _| {
        next.database.suffix.clone_from(&running.database.suffix);
    }),
    ("database.directory", |next, running, _| {
        next.database
            .directory
            .clone_from(&running.database.directory);
    }),
    ("database.rootdn", |next, running, _| {
        next.database.rootdn.clone_from(&running.database.rootdn);
    }),
    ("database.sync", |next, running, _| {
        next.database.sync = running.database.sync;
    }),
    ("database.memberof", |next, running, _| {
        next.database.memberof = running.database.memberof;
    }),
    ("database.map_size_bytes", |next, running, _| {
        next.database.map_size_bytes = running.database.map_size_bytes;
    }),
    (
        "replication (server_id, provider and the rest of [replication] but its consumers)",
        |next, running, _| {
            next.replication = ReplicationConfig {
                consumer: std::mem::take(&mut next.replication.consumer),
                ..running.replication.clone()
            };
        },
    ),
    (
        "replication.consumer (they would run with a server_id or provider other than the \
         file's, or turn a read-only replica writable or back)",
        |next, running, fresh| {
            if !consumers_apply_live(&running.replication, &fresh.replication) {
                next.replication
                    .consumer
                    .clone_from(&running.replication.consumer);
            }
        },
    ),
];

/// The keys whose change needs a restart, as the log names them: those `fresh` sets to
/// something other than their running value.
fn restart_only_changes(running: &Config, fresh: &Config) -> Vec<&'static str> {
    RESTART_ONLY
        .iter()
        .filter(|(_, keep)| {
            let mut kept = fresh.clone();
            keep(&mut kept, running, fresh);
            kept != *fresh
        })
        .map(|(name, _)| *name)
        .collect()
}

/// What runs once `fresh` is applied to a server running `running`: `fresh` with the running
/// value of every key that needs a restart. The reload applies and checks this, and it is the
/// `running` of the next reload, so a value never applied is never taken for a running one.
pub fn kept_running(running: &Config, fresh: &Config) -> Config {
    let mut next = fresh.clone();
    for (_, keep) in RESTART_ONLY {
        keep(&mut next, running, fresh);
    }
    next
}

/// `kept_running`, checked as a whole: a rule between keys holds for what will run, not only
/// for the file (`require_tls = true` with TLS files that need a restart would refuse every
/// bind over ldap:// while StartTLS is not offered). An error refuses the reload.
fn checked_next(running: &Config, fresh: &Config) -> Result<Config, String> {
    let next = kept_running(running, fresh);
    next.check().map_err(|problem| {
        format!(
            "{problem} (with the running value of each key that needs a restart: {})",
            restart_only_changes(running, fresh).join(", ")
        )
    })?;
    Ok(next)
}

/// Whether the consumers of `fresh` may be started and stopped live. They run with the running
/// replication identity (`server_id`, `provider`: CSNs, cookies, conflict resolution and the
/// provider side are set up when the server starts), so only when the file keeps that
/// identity; and not when they would turn a read-only replica (client writes referred) into a
/// writable server or back. Otherwise the consumers stay as running until a restart: started
/// under another identity, a multi-provider consumer would run as a replica's, whose first
/// refresh deletes every local entry its provider lacks.
fn consumers_apply_live(running: &ReplicationConfig, fresh: &ReplicationConfig) -> bool {
    (fresh.server_id, fresh.provider) == (running.server_id, running.provider)
        && fresh.is_read_only_replica() == running.is_read_only_replica()
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
    // What needs a restart keeps its running value: everything below is built from `next`.
    let next = checked_next(running, fresh)?;
    let settings = ServerSettings::from_config(&next)?;
    let (schema, rules, indexes) = match &context.database {
        Some(database) => {
            let running_schema = database.schema();
            let extended = schema_additions(&running_schema, &next)?;
            let schema = extended.as_ref().unwrap_or(&running_schema);
            let policy = AccessPolicy::for_config(&next, schema)
                .map_err(|problem| format!("[[access]]: {problem}"))?;
            let rules = Rules::compile(Arc::new(policy), &settings, schema)?;
            let wanted = lmdir_store::StoreOptions::from_config(&next).indexes;
            let indexes = database
                .store
                .index_additions(&wanted, schema)
                .map_err(|problem| format!("[database.index]: {problem}"))?;
            (extended, Some(rules), Some(indexes))
        }
        None => (None, None, None),
    };
    Ok(Prepared {
        schema,
        settings,
        rules,
        indexes,
        restart_needed: restart_only_changes(running, fresh),
        config: next,
    })
}

/// Applies `fresh` (read from the file `identity` names) to the server running `running` (the
/// config it started with, or what the last reload returned). Returns what runs now: `fresh`
/// with the running value of each key that needs a restart (`kept_running`), the `running` of
/// the next reload. On an error nothing changed and the message says why. Index builds
/// continue in the background after this returns (logged when done). The caller logs which
/// configuration is live (after it applied the new log settings).
pub fn reload(
    context: &Arc<ServerContext>,
    running: &Config,
    fresh: &Config,
    mut identity: ConfigIdentity,
) -> Result<Config, String> {
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
    let settings = Arc::new(prepared.settings);
    // One store: an operation starting from here on takes new settings and new rules alike,
    // one starting before takes old ones alike (`Running`).
    match (&context.database, prepared.rules) {
        (Some(database), Some(rules)) => database.live.store(Arc::new(Running {
            settings,
            rules: Arc::new(rules),
        })),
        _ => context.settings_live.store(settings),
    }
    let (stopped, started) = crate::replication::consumer::reconcile(context, &consumers);
    if !stopped.is_empty() || !started.is_empty() {
        info!("reload: replication consumers stopped {stopped:?}, started {started:?}");
    }
    if let Some(database) = &context.database {
        warn_unindexed_integrity(database, &prepared.config);
        database.set_accesslog(&prepared.config.accesslog);
        if let Some(indexes) = prepared.indexes {
            build_indexes(database.store.clone(), &prepared.config, indexes);
        }
    }
    identity.restart_pending = prepared
        .restart_needed
        .iter()
        .map(|name| name.to_string())
        .collect();
    context.set_config_identity(identity);
    Ok(prepared.config)
}

/// Warns about each attribute the `[integrity]` now in force looks up without an equality
/// index, neither built nor in `config` (one the same reload adds is being built).
fn warn_unindexed_integrity(database: &crate::Database, config: &Config) {
    let schema = database.schema();
    let wanted = &config.database.index;
    database.warn_unindexed(&database.running().rules.integrity, |attr| {
        let built = database.store.indexed_kinds(attr);
        built.contains(lmdir_store::IndexKinds::EQUALITY)
            || wanted.iter().any(|(name, kinds)| {
                schema.attribute(name) == Some(attr)
                    && kinds.contains(&lmdir_config::IndexKind::Equality)
            })
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    const CONSUMER_NAME: &str = "replication.consumer (they would run with a server_id or \
         provider other than the file's, or turn a read-only replica writable or back)";
    const IDENTITY_NAME: &str =
        "replication (server_id, provider and the rest of [replication] but its consumers)";

    /// A config whose `[database]` is followed by `rest` (further tables).
    fn config(rest: &str) -> Config {
        let text = format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:3389\"]\n[database]\n\
             suffix = \"dc=example,dc=com\"\ndirectory = \"/nonexistent\"\n{rest}"
        );
        Config::from_str(&text, "test.toml").unwrap()
    }

    fn consumer(rid: u16) -> String {
        format!(
            "[[replication.consumer]]\nrid = {rid}\nprovider = \"ldap://127.0.0.1:{}\"\n\
             search_base = \"dc=example,dc=com\"\n",
            4000 + rid
        )
    }

    fn multi_provider(rids: &[u16]) -> Config {
        let consumers: String = rids.iter().map(|rid| consumer(*rid)).collect();
        config(&format!(
            "[replication]\nserver_id = 1\nprovider = true\n{consumers}"
        ))
    }

    #[test]
    fn a_standalone_server_keeps_its_identity_and_starts_no_consumer_of_another() {
        let standalone = config("");
        let multi = multi_provider(&[1]);
        let next = kept_running(&standalone, &multi);
        assert_eq!(next.replication, standalone.replication);
        assert_eq!(
            restart_only_changes(&standalone, &multi),
            [IDENTITY_NAME, CONSUMER_NAME]
        );
    }

    #[test]
    fn what_runs_never_takes_a_refused_change_for_a_running_one() {
        let standalone = config("");
        let replica = config(&consumer(1));
        let after_one = kept_running(&standalone, &replica);
        assert_eq!(after_one, kept_running(&after_one, &replica));
        assert!(after_one.replication.consumer.is_empty());
        // The second reload of the same file names it again.
        assert_eq!(restart_only_changes(&after_one, &replica), [CONSUMER_NAME]);
        // Restart-only keys keep their running values; the rest is the file's.
        let mut fresh = replica.clone();
        fresh.server.listen = vec!["ldap://127.0.0.1:4389".to_string()];
        fresh.server.size_limit = 7;
        let next = kept_running(&standalone, &fresh);
        assert_eq!(next.server.listen, standalone.server.listen);
        assert_eq!(next.server.size_limit, 7);
    }

    #[test]
    fn require_tls_is_checked_with_the_tls_files_that_will_run() {
        let without_tls = config("");
        let mut with_tls = config("");
        with_tls.server.require_tls = true;
        with_tls.server.tls_certificate = "/etc/lmdir/cert.pem".into();
        with_tls.server.tls_key = "/etc/lmdir/key.pem".into();
        assert_eq!(with_tls.check(), Ok(()), "valid on its own");
        let problem = checked_next(&without_tls, &with_tls).unwrap_err();
        assert!(
            problem.starts_with("server.require_tls: ")
                && problem.contains("server.tls_certificate/tls_key"),
            "{problem}"
        );
        // Once TLS runs, require_tls alone changes live.
        let mut running_tls = with_tls.clone();
        running_tls.server.require_tls = false;
        assert_eq!(checked_next(&running_tls, &with_tls), Ok(with_tls));
    }

    #[test]
    fn consumers_change_live_under_the_running_identity() {
        let running = multi_provider(&[1]);
        let fresh = multi_provider(&[2, 3]);
        assert_eq!(kept_running(&running, &fresh), fresh);
        assert!(restart_only_changes(&running, &fresh).is_empty());
        // A read-only replica may pull from another provider.
        let (replica, moved) = (config(&consumer(1)), config(&consumer(2)));
        assert_eq!(kept_running(&replica, &moved), moved);
    }
    /// A server started on `config` (its database directory made under `directory`).
    fn started(config: &mut Config, directory: &std::path::Path) -> Started {
        config.database.directory = directory.join("db");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(async {
            let settings = ServerSettings::from_config(config).unwrap();
            let database = crate::Database::open(config).unwrap();
            crate::server::start(settings, Some(database))
                .await
                .unwrap()
        });
        Started {
            runtime,
            server: Some(server),
        }
    }

    struct Started {
        runtime: tokio::runtime::Runtime,
        server: Option<crate::server::RunningServer>,
    }

    impl Drop for Started {
        fn drop(&mut self) {
            if let Some(server) = self.server.take() {
                self.runtime
                    .block_on(server.shutdown(std::time::Duration::from_secs(5)));
            }
        }
    }

    /// At each event logged on its thread, what an operation starting then would take: the
    /// size limit and whether the access policy is the default one.
    struct Witness {
        context: Arc<ServerContext>,
        seen: Arc<std::sync::Mutex<Vec<(u64, bool)>>>,
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Witness {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            let size_limit = self.context.settings().size_limit;
            let database = self.context.database.as_ref().expect("a database");
            let default_policy = database.policy().is_default();
            self.seen.lock().unwrap().push((size_limit, default_policy));
        }
    }

    /// What one operation takes (settings, access policy, limits) is swapped as one: at no
    /// point of a reload (here: each line it logs, the consumers' among them) does an
    /// operation starting then see the new settings with the old policy, or the reverse.
    #[test]
    fn an_operation_never_sees_half_of_a_reload() {
        use tracing_subscriber::layer::SubscriberExt;
        let directory = tempfile::tempdir().unwrap();
        let mut running = multi_provider(&[]);
        let started = started(&mut running, directory.path());
        let context = started.server.as_ref().unwrap().context().clone();
        let mut fresh = multi_provider(&[1]);
        fresh
            .database
            .directory
            .clone_from(&running.database.directory);
        fresh.server.size_limit = 5;
        fresh.access = config(
            "[[access]]\nto = { subtree = \"dc=example,dc=com\" }\n\
             by = [ { who = \"users\", access = \"read\" } ]\n",
        )
        .access;
        let seen = Arc::default();
        let witness = Witness {
            context: context.clone(),
            seen: Arc::clone(&seen),
        };
        let subscriber = tracing_subscriber::registry().with(witness);
        let _entered = started.runtime.enter();
        let identity = ConfigIdentity::of(b"", "test.toml");
        tracing::subscriber::with_default(subscriber, || {
            reload(&context, &running, &fresh, identity).unwrap();
        });
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.iter()
                .all(|pair| matches!(pair, (500, true) | (5, false))),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(5, false)),
            "the consumer's start is logged: {seen:?}"
        );
    }
}
