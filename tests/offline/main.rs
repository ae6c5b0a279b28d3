//! Tests that need no root and build no namespace: the docs' examples, the
//! corpus of broken topologies, fuzz regressions, the VPN codecs' wire bytes
//! against tshark, the benchmark scripts' own checks, the CI example against
//! actionlint and GitHub's schema, the Kubernetes example against the API
//! schema, setup.sh's modes, the Debian package's control file against
//! Cargo.toml, and `report` merging several results files.

#[path = "../common/mod.rs"]
mod common;

mod bench_assertions;
mod bench_before_after;
mod bench_distributed;
mod bench_main_job;
mod bench_router_datapaths;
mod bench_scale;
mod bench_soak;
mod ci_workflow;
mod docs;
mod docs_flags;
mod example_files;
mod fuzz_regressions;
mod hosts_inventory;
mod kubernetes_example;
mod package_sources;
mod report_merge;
mod setup_modes;
mod validate;
mod vpn_wire;
