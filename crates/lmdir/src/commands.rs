//! One function per subcommand; each reads the config, opens what it needs and calls the crate
//! that does the work.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use lmdir_config::Config;
use lmdir_schema::{Filter, PreparedFilter, Schema};
use lmdir_store::{Scope, SearchSpec, Store, StoreOptions};

use crate::Command;

/// Filter nesting accepted on the command line (the server's limit comes from the config).
const FILTER_DEPTH_MAX: usize = 64;
/// People in the demo directory loaded into an empty database by `lmdir serve`.
pub const DEMO_PEOPLE: u64 = 1000;

pub fn run(config_path: Option<&Path>, command: Command) -> Result<ExitCode> {
    let config = match config_path {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default(),
    };
    // The server sets up its own logging (file, format, reloadable filter).
    if !matches!(command, Command::Serve { .. }) {
        crate::logging::init_for_command(&config.server);
    }
    match command {
        Command::Gen {
            people,
            seed,
            profile,
        } => {
            let stdout = std::io::stdout().lock();
            let mut output = BufWriter::with_capacity(1 << 20, stdout);
            lmdir_gen::generate_profile(people, seed, profile, &mut output)
                .context("writing the generated LDIF")?;
            output.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Load {
            ldif,
            quick,
            continue_on_error,
            memory,
            threads,
            no_file_urls,
        } => {
            let schema = load_schema(&config)?;
            let mut options = lmdir_load::LoadOptions::new(
                database_directory(&config)?,
                store_options(&config),
                schema,
            );
            options.quick = quick;
            options.continue_on_error = continue_on_error;
            // The operator's own file: `attr:< file://` reads as slapadd reads it, unless the
            // operator says the LDIF came from elsewhere.
            options.file_urls = !no_file_urls;
            options.file_urls_refused_because = "--no-file-urls was given";
            options.memory_bytes_max = match memory {
                Some(text) => parse_size(&text)?,
                None => 0,
            };
            options.threads = threads.unwrap_or(0);
            options.progress = true;
            options.creators_name = config.database.rootdn.clone();
            options.unique = config
                .integrity
                .unique
                .iter()
                .map(|rule| lmdir_load::UniqueScope {
                    base: rule.base.clone(),
                    attributes: rule.attributes.clone(),
                })
                .collect();
            let summary = if ldif.as_os_str() == "-" {
                lmdir_load::load_from(&options, Box::new(std::io::stdin()), 0)?
            } else {
                lmdir_load::load(&options, &ldif)?
            };
            print!("{summary}");
            Ok(if summary.skipped_count > 0 {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Export { output } => {
            let store = open_store(&config, Access::Read)?;
            let count = match output {
                Some(path) => {
                    // Entries carry their userPassword hashes: owner-only, as the database.
                    let file = crate::private_file::create(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    let mut writer = BufWriter::with_capacity(1 << 20, file);
                    let count = store.export(&mut writer)?;
                    writer.flush()?;
                    count
                }
                None => {
                    let mut writer = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
                    let count = store.export(&mut writer)?;
                    writer.flush()?;
                    count
                }
            };
            eprintln!("exported {count} entries");
            Ok(ExitCode::SUCCESS)
        }
        Command::Reindex { attributes } => {
            let store = open_store(&config, Access::Write)?;
            let attributes = if attributes.is_empty() {
                None
            } else {
                Some(attributes.as_slice())
            };
            let summary = lmdir_load::reindex(&store, attributes, 0, 0)?;
            println!(
                "reindexed {} ({} entries) in {:.2} s",
                summary.indexes.join(", "),
                summary.entries,
                summary.elapsed.as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Stat => {
            let store = open_store(&config, Access::Read)?;
            print!("{}", store.stat()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let store = open_store(&config, Access::Read)?;
            let report = store.check()?;
            println!("{report}");
            // Warnings, not damage: they leave the exit status alone.
            print!("{}", crate::password_audit::audit(&store)?);
            if report.is_clean() && !report.notes.is_empty() {
                println!("check: clean (some indexes could not be verified: see above)");
                Ok(ExitCode::SUCCESS)
            } else if report.is_clean() {
                println!("check: clean");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("check: DAMAGED");
                Ok(ExitCode::FAILURE)
            }
        }
        Command::Search {
            base,
            filter,
            attributes,
            scope,
            size_limit,
            subentries,
        } => {
            let store = open_store(&config, Access::Read)?;
            let shown = Shown {
                attributes: &attributes,
                size_limit,
                subentries,
            };
            search(&store, &base, &filter, &scope, &shown)
        }
        Command::Serve { no_demo } => crate::service::serve(config, config_path, no_demo),
        Command::Backup {
            directory,
            no_check,
        } => crate::backup::backup(&config, &directory, !no_check),
        Command::Migrate {
            from,
            out,
            directory,
            listen,
            accept_untranslated_access,
            accept_untranslated_limits,
        } => {
            let options = MigrateChoices {
                directory,
                listen,
                accept_untranslated_access,
                accept_untranslated_limits,
            };
            migrate(&from, out.as_deref(), options)
        }
    }
}

/// What the `lmdir migrate` command line adds to the source.
struct MigrateChoices {
    directory: Option<PathBuf>,
    listen: Vec<String>,
    accept_untranslated_access: bool,
    accept_untranslated_limits: bool,
}

/// `lmdir migrate`: translates, checks the result with the config loader, writes the schema
/// files and the config, and lists every directive not translated one to one on stderr. A
/// refused translation (access rules lmdir would widen, limits it would drop) writes nothing.
fn migrate(from: &Path, out: Option<&Path>, choices: MigrateChoices) -> Result<ExitCode> {
    let schema_directory = match out.and_then(Path::parent) {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let options = lmdir_migrate::MigrateOptions {
        schema_directory: schema_directory.clone(),
        database_directory: choices.directory,
        listen: choices.listen,
        accept_untranslated_access: choices.accept_untranslated_access,
        accept_untranslated_limits: choices.accept_untranslated_limits,
    };
    let migration = lmdir_migrate::migrate_path(from, &options).context("nothing was written")?;
    let source_name = out.map_or("<migrated config>".to_string(), |path| {
        path.display().to_string()
    });
    Config::from_str(&migration.config_text, &source_name)
        .context("the migrated config does not load")?;
    for file in &migration.schema_files {
        let path = schema_directory.join(&file.file_name);
        std::fs::write(&path, &file.text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    match out {
        Some(path) => {
            // The config carries rootpw and the consumers' credentials: owner-only.
            crate::private_file::write(path, migration.config_text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{}", migration.config_text),
    }
    for line in lmdir_migrate::report(&migration.notes) {
        eprintln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

fn database_directory(config: &Config) -> Result<PathBuf> {
    config
        .database_directory()
        .with_context(|| format!("resolving {}", config.database.directory.display()))
}

/// The built-in schema plus the config's extra `.schema` files (shared with the server, which
/// logs its loading notes).
pub fn load_schema(config: &Config) -> Result<Arc<Schema>> {
    Ok(lmdir_server::database::schema_from_config(config)?)
}

pub fn store_options(config: &Config) -> StoreOptions {
    StoreOptions::from_config(config)
}

/// How a command opens the store: `Write` takes the directory's writer lock (refused while a
/// server, load or reindex holds it); `Read` takes none and works beside them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

pub fn open_store(config: &Config, access: Access) -> Result<Store> {
    let directory = database_directory(config)?;
    let (options, schema) = (store_options(config), load_schema(config)?);
    let store = match access {
        Access::Write => Store::open(&directory, options, schema),
        Access::Read => Store::open_read_only(&directory, options, schema),
    }
    .with_context(|| format!("opening the database in {}", directory.display()))?;
    if let Some(change) = store.index_config_change() {
        // Not damage: the data is whole, an index not built yet is not used by searches and
        // one no longer configured is ignored; `lmdir check` still exits 0.
        eprintln!(
            "lmdir: the configured indexes differ from the built ones ({change}); run `lmdir reindex` (not damage)"
        );
    }
    Ok(store)
}

/// "512M", "2G", "1048576" → bytes.
fn parse_size(text: &str) -> Result<usize> {
    let text = text.trim();
    let (digits, multiplier) = match text.chars().last().map(|unit| unit.to_ascii_uppercase()) {
        Some('K') => (&text[..text.len() - 1], 1usize << 10),
        Some('M') => (&text[..text.len() - 1], 1 << 20),
        Some('G') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    let number: usize = digits
        .trim()
        .parse()
        .with_context(|| format!("--memory {text:?}: expected a size like 512M or 2G"))?;
    number
        .checked_mul(multiplier)
        .with_context(|| format!("--memory {text:?} is too large"))
}

/// Most links an in-chain item follows (as the server).
const IN_CHAIN_DEPTH_MAX: usize = 64;

/// What `lmdir search` returns of the entries it finds.
struct Shown<'a> {
    /// The attributes written (all when empty or `*`).
    attributes: &'a [String],
    /// Most entries written (0 = unlimited).
    size_limit: usize,
    /// The Subentries control's value (RFC 3672), None when not given.
    subentries: Option<bool>,
}

/// Writes the entries a search finds as LDIF. The entries a server's search would skip are
/// skipped through the same code (`lmdir_server::HiddenEntries`): subentries as `--subentries`
/// asks; glue is shown (the offline tool reads everything, as with ManageDsaIT) and aliases
/// are not dereferenced.
fn search(
    store: &Store,
    base: &str,
    filter: &str,
    scope: &str,
    shown: &Shown<'_>,
) -> Result<ExitCode> {
    let scope = match scope {
        "base" => Scope::Base,
        "one" | "onelevel" => Scope::One,
        "sub" | "subtree" => Scope::Sub,
        other => bail!("--scope {other:?}: expected base, one or sub"),
    };
    let filter =
        Filter::parse(filter, FILTER_DEPTH_MAX).with_context(|| format!("filter {filter:?}"))?;
    let read = store.read()?;
    let spec = SearchSpec {
        base: base.to_string(),
        scope,
        filter: offline_filter(&read, &filter)?,
        // Counted here: entries skipped as hidden do not count.
        size_limit: 0,
        lookthrough_limit: 0,
    };
    let hidden =
        lmdir_server::HiddenEntries::new(&read, scope, shown.subentries)?.showing_glue(true);
    let wanted: Vec<String> = shown
        .attributes
        .iter()
        .map(|name| name.to_ascii_lowercase())
        .collect();
    let mut output = BufWriter::new(std::io::stdout().lock());
    let mut ldif = lmdir_ldif::LdifWriter::new(&mut output);
    let mut count = 0usize;
    for result in read.search(&spec)? {
        let (id, entry) = result?;
        if hidden.hides(id, &entry) {
            continue;
        }
        if shown.size_limit > 0 && count >= shown.size_limit {
            ldif.flush()?;
            eprintln!("size limit of {} reached", shown.size_limit);
            return Ok(ExitCode::from(4));
        }
        write_selected(&mut ldif, &read.dn_of(id)?, &entry, &wanted)?;
        count += 1;
    }
    ldif.flush()?;
    eprintln!("{count} entries");
    Ok(ExitCode::SUCCESS)
}

/// `filter` prepared for `read`, its in-chain items resolved with full rights (the offline
/// tool reads everything) within the server's depth bound.
fn offline_filter(read: &lmdir_store::ReadTxn, filter: &Filter) -> Result<PreparedFilter> {
    let mut prepared = read.schema().prepare_filter(filter);
    let never = || None;
    let no_computed_links = |_: &[u8]| Vec::new();
    let bounds = lmdir_store::InChainBounds {
        depth_max: IN_CHAIN_DEPTH_MAX,
        examined_max: 0,
        stop: &never,
        computed_links: &no_computed_links,
    };
    prepared.resolve_in_chain(&mut |query| {
        let outcome = read.in_chain_closure(query, &bounds, &mut |_, _, _| true)?;
        Ok::<_, lmdir_schema::LdapError>(lmdir_schema::EntryIdSet::new(
            outcome.members.iter().collect(),
        ))
    })?;
    Ok(prepared)
}

/// Writes `entry` at `dn` with the attributes `wanted` (lowercased names; all when empty).
fn write_selected<W: Write>(
    ldif: &mut lmdir_ldif::LdifWriter<W>,
    dn: &str,
    entry: &lmdir_store::EntryRef<'_>,
    wanted: &[String],
) -> Result<()> {
    let mut values = Vec::new();
    for attribute in entry.attributes() {
        let description = attribute.description_text();
        let base_name = description
            .split(';')
            .next()
            .unwrap_or(description)
            .to_ascii_lowercase();
        if !wanted.is_empty() && !wanted.iter().any(|name| name == "*" || *name == base_name) {
            continue;
        }
        for (original, _normalized) in attribute.values() {
            values.push((description, original));
        }
    }
    ldif.write_entry(dn, values)?;
    Ok(())
}

/// Generates `lmdir gen` people into a temporary LDIF and bulk-loads it; false when the suffix
/// is not the demo's (dc=example,dc=com) and nothing was loaded.
pub fn load_demo(config: &Config) -> Result<bool> {
    if !config
        .database
        .suffix
        .eq_ignore_ascii_case("dc=example,dc=com")
    {
        eprintln!(
            "lmdir: the demo directory is for dc=example,dc=com; not loading it under {}",
            config.database.suffix
        );
        return Ok(false);
    }
    let scratch = tempfile::tempdir().context("creating a scratch directory for the demo LDIF")?;
    let ldif_path = scratch.path().join("demo.ldif");
    let mut file = BufWriter::new(std::fs::File::create(&ldif_path)?);
    lmdir_gen::generate(DEMO_PEOPLE, 1, &mut file)?;
    file.flush()?;
    drop(file);
    let directory = database_directory(config)?;
    // An empty store directory was created by opening it; the loader builds beside it and renames.
    let mut options =
        lmdir_load::LoadOptions::new(directory, store_options(config), load_schema(config)?);
    options.creators_name = config.database.rootdn.clone();
    let summary = lmdir_load::load(&options, &ldif_path)?;
    eprint!("demo directory: {summary}");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
