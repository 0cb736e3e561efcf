//! `lmdir`: the thin command-line binary over the lmdir crates.
//!
//! Every subcommand reads one TOML config (`--config FILE`, else the embedded default), opens what it
//! needs and hands over to the crate that does the work.

mod backup;
mod banner;
mod commands;
mod log_buffer;
mod log_line;
mod logging;
mod password_audit;
mod private_file;
mod service;

// The loader and the server allocate many small buffers from many threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "lmdir", version, about = "An LDAPv3 directory server on LMDB")]
struct Cli {
    /// The TOML configuration file; without it the embedded default is used.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the LDAP server. Without --config, an empty database first gets a demo directory.
    Serve {
        /// Without --config: do not load the demo directory into an empty database.
        #[arg(long)]
        no_demo: bool,
    },
    /// Bulk-load an LDIF file (like slapadd).
    Load {
        /// The LDIF file; `-` reads standard input (`slapcat | lmdir load -`).
        ldif: PathBuf,
        /// Skip schema checks and fsync until the end (like slapadd -q).
        #[arg(long)]
        quick: bool,
        /// Skip bad records, report each and count them, instead of stopping at the first.
        #[arg(long)]
        continue_on_error: bool,
        /// Memory budget for sorting index keys before spilling to disk, e.g. 512M or 2G.
        #[arg(long)]
        memory: Option<String>,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Refuse `attr:< file://` values instead of reading the named files (for LDIF from
        /// elsewhere: by default they are read, as slapadd reads them).
        #[arg(long)]
        no_file_urls: bool,
    },
    /// Write every entry as LDIF, parents before children (like slapcat).
    Export {
        /// Output file; standard output when absent.
        output: Option<PathBuf>,
    },
    /// Rebuild the named indexes, or all of them (like slapindex).
    Reindex { attributes: Vec<String> },
    /// Print entry count, database sizes and per-index keys and postings.
    Stat,
    /// Verify every DN-tree link and index posting against the entries.
    Check,
    /// Search the database offline.
    Search {
        base: String,
        filter: String,
        attributes: Vec<String>,
        #[arg(long, default_value = "sub")]
        scope: String,
        /// Maximum entries to return (0 = unlimited).
        #[arg(long, default_value_t = 0)]
        size_limit: usize,
        /// As the Subentries control (RFC 3672): `true` returns only subentries, `false` only
        /// ordinary entries; without it a one-level or subtree search skips subentries.
        #[arg(long)]
        subentries: Option<bool>,
    },
    /// Write an lmdir config from an OpenLDAP slapd.conf, `slapcat -n0` LDIF or slapd.d directory.
    Migrate {
        /// The OpenLDAP configuration: slapd.conf, `slapcat -n0` output, or a cn=config directory.
        #[arg(long)]
        from: PathBuf,
        /// The lmdir config to write; schema files go beside it. Standard output when absent
        /// (schema files then go to the current directory).
        #[arg(long)]
        out: Option<PathBuf>,
        /// lmdir's database directory, written into the config.
        #[arg(long)]
        directory: Option<PathBuf>,
        /// A listener URL written into the config (repeatable; slapd had them from -h).
        #[arg(long)]
        listen: Vec<String>,
        /// Write the config even when access rules (or clauses whose requesters later ones
        /// grant more) cannot be translated: lmdir may then grant more than slapd did. Without
        /// it such a configuration is refused, nothing written, each rule named.
        #[arg(long)]
        accept_untranslated_access: bool,
        /// Write the config even when limits (`limits`, `sizelimit`, `timelimit`) cannot be
        /// translated in full: lmdir's defaults then stand in for them. Without it such a
        /// configuration is refused, nothing written, each directive named.
        #[arg(long)]
        accept_untranslated_limits: bool,
    },
    /// Copy the database, consistent and compacted, into a new directory while the server runs;
    /// the copy is then checked. Restore: stop the server, put DIR/data.mdb in the database
    /// directory, start it.
    Backup {
        /// The directory to create (or an empty one); the copy is DIRECTORY/data.mdb.
        directory: PathBuf,
        /// Skip checking the copy (the check reads every entry and posting).
        #[arg(long)]
        no_check: bool,
    },
    /// Write a synthetic directory of N people as LDIF to standard output.
    Gen {
        people: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// `standard` (~680 bytes of LDIF per person) or `large` (~1,210 bytes: long
        /// descriptions, more mail and phone values, postal addresses, three times the groups).
        #[arg(long, default_value = "standard", value_parser = parse_profile)]
        profile: lmdir_gen::Profile,
    },
}

fn parse_profile(text: &str) -> Result<lmdir_gen::Profile, String> {
    lmdir_gen::Profile::parse(text)
        .ok_or_else(|| format!("unknown profile '{text}' (standard, large, mixed)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(cli.config.as_deref(), cli.command) {
        Ok(code) => code,
        // `lmdir export | head`: the reader left, which is how such a pipeline ends, not a failure.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lmdir: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether the error comes from writing to a pipe whose reader has gone (EPIPE; Rust ignores
/// SIGPIPE, so the write returns the error instead of killing the process).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        let io = cause.downcast_ref::<std::io::Error>().or_else(|| {
            // The store's I/O error carries the io::Error in its message, not as a source.
            match cause.downcast_ref::<lmdir_store::StoreError>() {
                Some(lmdir_store::StoreError::Io(io)) => Some(io),
                _ => None,
            }
        });
        io.is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
