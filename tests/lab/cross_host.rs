//! A lab split over three machines emulated on this one (crate::emulated):
//! home-split.toml's pc, router and server, each host building its part with
//! `tunbench up --host` (or the host found from its underlay address), the
//! links between them VXLAN over an underlay of MTU 1550.

use crate::common::*;
use crate::emulated::{Host, Hosts};
use crate::parts::{Parts, on};

/// home-split.toml's hosts, in the order of the emulated hosts: their
/// underlay addresses are 198.18.230.1, .2 and .3, as the file declares.
const HOSTS: [&str; 3] = ["pc", "router", "server"];

/// The underlay MTU the file declares: 1500-byte links plus VXLAN's 50.
const UNDERLAY_MTU: u32 = 1550;

fn home_split() -> String {
    topo("home-split.toml").to_str().unwrap().to_string()
}

/// Whether host `h` has lab `lab`'s record.
fn has_record(h: &Host, lab: &str) -> bool {
    h.command("test")
        .args(["-e", state_dir(lab).to_str().unwrap()])
        .status()
        .expect("running test")
        .success()
}

fn ping_on(h: &Host, lab: &str, to: &str) -> bool {
    on(h, &["exec", lab, "pc", "--", "ping", "-c1", "-W2", to])
        .status
        .success()
}

#[test]
fn home_split_over_three_hosts_pings_across_two_vxlan_hops_and_wireguard() {
    let hosts = Hosts::with_mtu(3, UNDERLAY_MTU);
    let lab = lab_name("xh");
    let file = home_split();
    let parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    for (h, name) in hosts.hosts.iter().zip(HOSTS) {
        let mut args = vec!["up", file.as_str(), "--name", lab.as_str()];
        // The pc host is found from its underlay address.
        if name != "pc" {
            args.extend(["--host", name]);
        }
        let o = on(h, &args);
        assert!(o.status.success(), "up on {name}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("(host {name}'s part)")),
            "{}",
            text(&o)
        );
        assert_eq!(h.namespaces().len(), 1, "on {name}: {:?}", h.namespaces());
    }
    let pc = &hosts.hosts[0];
    for (to, what) in [
        ("198.18.1.10", "IPv4 through the router"),
        ("2001:2:0:1::10", "IPv6 through the router"),
        ("198.18.96.2", "IPv4 through WireGuard"),
        ("2001:2:0:96::2", "IPv6 through WireGuard"),
    ] {
        eventually(&format!("pc reaches the server at {to} ({what})"), || {
            ping_on(pc, &lab, to)
        });
    }
    let status = on(&hosts.hosts[1], &["status", &lab]);
    assert!(
        text(&status).contains("1 nodes, host router's part"),
        "{}",
        text(&status)
    );
    for (h, name) in hosts.hosts.iter().zip(HOSTS) {
        let o = on(h, &["down", &lab]);
        assert!(o.status.success(), "down on {name}: {}", text(&o));
        assert!(h.namespaces().is_empty(), "{name}: {:?}", h.namespaces());
        assert!(
            h.vxlan_devices().is_empty(),
            "{name}: {:?}",
            h.vxlan_devices()
        );
        assert!(!has_record(h, &lab), "{name} keeps lab {lab}'s record");
    }
    drop(parts);
    assert!(namespaces(&lab).is_empty(), "{:?}", namespaces(&lab));
    assert!(!state_dir(&lab).exists());
}

#[test]
fn up_on_a_machine_of_no_or_several_declared_hosts_builds_nothing() {
    let hosts = Hosts::with_mtu(1, UNDERLAY_MTU);
    let h = &hosts.hosts[0];
    let lab = lab_name("xn");
    let file = home_split();
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    let refused = |args: &[&str], want: &str| {
        let o = on(h, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(h.namespaces().is_empty(), "{:?}", h.namespaces());
        assert!(!has_record(h, &lab));
    };
    refused(
        &["up", &file, "--name", &lab, "--host", "nas"],
        "declares no such host; its hosts: pc (198.18.230.1), router (198.18.230.2), server (198.18.230.3)",
    );
    refused(
        &[
            "up",
            &topo("router.toml").to_string_lossy(),
            "--name",
            &lab,
            "--host",
            "pc",
        ],
        "router.toml declares no [hosts]",
    );
    // This host's 198.18.230.1 makes it pc; without it, it is no host.
    h.ip(&["addr", "del", &format!("{}/24", h.underlay), "dev", "u0"]);
    refused(
        &["up", &file, "--name", &lab],
        "this machine has none of the underlay addresses 198.18.230.1 (pc), 198.18.230.2 (router), 198.18.230.3 (server); pass --host NAME",
    );
    for a in ["198.18.230.2/24", "198.18.230.3/24"] {
        h.ip(&["addr", "add", a, "dev", "u0"]);
    }
    refused(
        &["up", &file, "--name", &lab],
        "the underlay addresses of several hosts (router, server); pass --host NAME",
    );
}
