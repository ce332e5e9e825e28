//! The integration tests: one binary, one module per area (linking thirty
//! binaries against the library cost more than running them), with the
//! helpers every area shares (`common`), the tool checks of the end-to-end
//! suites (`tools`) and the mock model servers (`mock_models`).
//!
//! Every file of this folder is a module here; a test below fails when one
//! is forgotten.

mod common;
mod mock_models;
mod tools;

mod agent_command_quoting;
mod agent_fakes;
mod agents;
mod best_of;
mod demo;
mod docs_defaults;
mod docs_generated;
mod e2e_agents;
mod edge_errors;
mod everyday;
mod exactly_once;
mod exit_codes;
mod faults;
mod first_hour;
mod fsck;
mod gates;
mod help;
mod hooks;
mod land;
mod layering;
mod lifecycle;
mod maintenance;
mod merge_queue;
mod ownership;
mod plan_new;
mod plans;
mod progress;
mod red_team;
mod runs;
mod sandbox;
mod state_log;
mod status;
mod supervision;
mod usage;
mod warm;
mod web;
mod what_lands;
mod workers;

#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("main.rs");
    let mut forgotten = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/it") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let module = path.extension().is_some_and(|e| e == "rs") || path.join("mod.rs").is_file();
        if module && name != "main" && !main.lines().any(|l| l == format!("mod {name};")) {
            forgotten.push(name);
        }
    }
    assert!(
        forgotten.is_empty(),
        "files not compiled into the tests: {forgotten:?}"
    );
    // Nothing left directly under tests/: cargo would build it as a
    // binary of its own.
    let stray: Vec<_> = std::fs::read_dir(dir.parent().expect("tests"))
        .expect("tests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    assert!(stray.is_empty(), "test files outside tests/it: {stray:?}");
}
