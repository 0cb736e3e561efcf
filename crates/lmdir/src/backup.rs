//! `lmdir backup DIR`: a consistent, compacted copy of the database taken while the server
//! runs, verified by `check` before it is called a backup.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use lmdir_config::Config;
use lmdir_store::Store;

use crate::commands::{load_schema, open_store, store_options};

/// The copy is written under this name and renamed to `data.mdb` once complete and synced, so
/// an interrupted backup never leaves a file that looks like a database.
const PARTIAL_NAME: &str = "data.mdb.partial";

pub fn backup(config: &Config, target: &Path, check: bool) -> Result<ExitCode> {
    prepare_target(target)?;
    // Read-only: a backup runs beside the server that holds the writer lock.
    let store = open_store(config, crate::commands::Access::Read)?;
    let started = Instant::now();
    let partial = target.join(PARTIAL_NAME);
    let bytes = store
        .copy_compacted(&partial)
        .with_context(|| format!("copying the database to {}", partial.display()))?;
    drop(store);
    std::fs::rename(&partial, target.join("data.mdb"))
        .with_context(|| format!("renaming {} to data.mdb", partial.display()))?;
    std::fs::File::open(target)
        .and_then(|directory| directory.sync_all())
        .with_context(|| format!("syncing {}", target.display()))?;
    eprintln!(
        "backup: {bytes} bytes written to {} in {:.1} s",
        target.join("data.mdb").display(),
        started.elapsed().as_secs_f64()
    );
    if !check {
        return Ok(ExitCode::SUCCESS);
    }
    let copy = Store::open(target, store_options(config), load_schema(config)?)
        .with_context(|| format!("opening the copy in {}", target.display()))?;
    let report = copy.check()?;
    println!("{report}");
    if report.is_clean() {
        println!("backup: clean");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("backup: the copy is DAMAGED; keep the previous backup");
        Ok(ExitCode::FAILURE)
    }
}

/// The target is created, or must be an empty directory: a backup never overwrites another.
fn prepare_target(target: &Path) -> Result<()> {
    match std::fs::read_dir(target) {
        Ok(mut items) => {
            if items.next().is_some() {
                bail!(
                    "{} is not empty: back up into a new directory",
                    target.display()
                );
            }
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(target)
                .with_context(|| format!("creating {}", target.display()))
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", target.display())),
    }
}
