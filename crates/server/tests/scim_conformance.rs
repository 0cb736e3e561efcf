//! SCIM conformance checked by a tool nobody here wrote: scim2-tester (PyPI), run by
//! `run_scim2_tester.py` against a running lmdir over HTTPS. Every check it runs must end in
//! SUCCESS, COMPLIANT, ACCEPTABLE, DEVIATION or SKIPPED; an ERROR or CRITICAL fails the test.
//! scripts/test.sh installs it into target/scim-venv (`LMDIR_SCIM_PYTHON` names another
//! interpreter). docs/scim.md lists what it skips and why.

use crate::common;

use common::{TestServer, ROOT_DN, ROOT_PASSWORD};
use std::path::PathBuf;
use std::process::Command;

/// The Python with scim2-tester: `LMDIR_SCIM_PYTHON`, else the venv scripts/test.sh makes.
fn tester_python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LMDIR_SCIM_PYTHON").filter(|path| !path.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/scim-venv/bin/python");
    let works = Command::new(&venv)
        .args(["-c", "import scim2_tester"])
        .output()
        .is_ok_and(|output| output.status.success());
    works.then_some(venv)
}

#[test]
fn scim2_tester_passes_every_applicable_check() {
    let Some(python) = tester_python() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "scim2-tester is missing: scripts/test.sh installs it into target/scim-venv"
        );
        eprintln!("scim2-tester not installed (scripts/test.sh installs it): not run");
        return;
    };
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let address = server.running().http_address().expect("http listener");
    let certificate = server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
        .expect("certificate");
    use base64::Engine;
    let authorization = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{ROOT_DN}:{ROOT_PASSWORD}"))
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/run_scim2_tester.py");
    let output = Command::new(python)
        .arg(script)
        .arg(format!("https://127.0.0.1:{}/scim/v2", address.port()))
        .arg(&certificate)
        .arg(&authorization)
        .output()
        .expect("run scim2-tester");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "scim2-tester found errors:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("SUCCESS"), "no check ran:\n{stdout}");
}
