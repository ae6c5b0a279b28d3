//! The kernel DS-Lite softwire on a freshly booted stock kernel: `auto` takes
//! the kernel's datapath, the lab comes up before anything has loaded
//! conntrack (whose module holds `nf_hooks_lwtunnel` on 6.1), NAT44 and the MSS
//! clamp work, and `down` says that the machine-wide switch stays on.
//! tests/tunnels/dslite.rs's kernel tests run here too (the stock_kernel
//! binary includes them), as they cannot on a kernel without seg6.

use crate::common::*;
use crate::kernel::stock_kernel;
use std::path::Path;

fn dslite_toml() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies/dslite.toml")
        .display()
        .to_string()
}

/// Runs first in the VM and alone (the stock-kernel profile), while nothing
/// has loaded nf_conntrack: a lab's first softwire on a fresh boot.
#[test]
fn fresh_boot_the_kernel_softwire_comes_up_measures_and_down_says_what_stays() {
    stock_kernel();
    assert!(
        !Path::new("/proc/sys/net/netfilter/nf_hooks_lwtunnel").exists(),
        "nf_conntrack is already loaded: this test must run first on a freshly booted kernel \
         (the stock-kernel profile gives it the highest priority)"
    );
    let file = dslite_toml();
    let lab = lab_name("skd");
    let _g = LabGuard(lab.clone());
    let run = tunbench(&[
        "run",
        &file,
        "--name",
        &lab,
        "--scenario",
        "kernel",
        "--duration",
        "1",
        "--runs",
        "1",
        "--no-latency",
        "--format",
        "json",
    ]);
    let out = text(&run);
    assert!(run.status.success(), "run of the kernel softwire: {out}");
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("run's JSON");
    let figures = json.to_string();
    assert!(
        figures.contains("bits_per_second") || figures.contains("bps"),
        "{figures}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/netfilter/nf_hooks_lwtunnel")
            .expect("nf_hooks_lwtunnel exists once the lab loaded conntrack")
            .trim(),
        "1"
    );
    assert_gone(&lab);
}

/// `up` of the kernel softwire, NAT44 seen from the server (the AFTR's pool
/// address), and `down`'s word that nf_hooks_lwtunnel stays set.
#[test]
fn the_kernel_aftr_translates_and_down_names_the_switch_it_leaves_on() {
    stock_kernel();
    let lab = lab_name("skn");
    let (g, o) = up(Path::new(&dslite_toml()), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // `auto` took the kernel's datapath: the MTU gate's veth pair exists, and
    // no userspace datapath process runs.
    let status = tunbench(&["status", &lab]);
    let said = text(&status);
    assert!(
        said.contains("swa-sw"),
        "status shows the kernel softwire's gate: {said}"
    );
    let userspace: Vec<String> = std::fs::read_dir(state_dir(&lab))
        .expect("the lab's state directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.starts_with("datapath-"))
        .collect();
    assert!(
        userspace.is_empty(),
        "userspace datapaths run: {userspace:?}"
    );
    // The server sees the client at the AFTR's NAT44 pool address.
    let ns = format!("{lab}-server");
    let listener = std::thread::spawn(move || {
        in_ns(&ns, || {
            let l = std::net::TcpListener::bind("198.18.52.10:7010").expect("bind on the server");
            let (_c, peer) = l.accept().expect("a connection through the softwire");
            peer.ip()
        })
    });
    eventually(
        "the client reaches the server through the softwire and NAT44",
        || {
            in_ns(&format!("{lab}-client"), || {
                std::net::TcpStream::connect_timeout(&"198.18.52.10:7010".parse().unwrap(), BOUND)
                    .is_ok()
            })
        },
    );
    let seen = listener.join().unwrap();
    assert_eq!(
        seen.to_string(),
        "198.18.53.1",
        "the server saw the client at {seen}, not the pool"
    );
    let down = tunbench(&["down", &lab]);
    let said = text(&down);
    assert!(down.status.success(), "down: {said}");
    assert!(
        said.contains("net.netfilter.nf_hooks_lwtunnel=1 stays"),
        "down says the machine-wide switch stays on: {said}"
    );
    drop(g);
    assert_gone(&lab);
}
