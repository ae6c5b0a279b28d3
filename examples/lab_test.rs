//! A test of your own network, the way a Rust project would write it: bring a
//! topology up in namespaces, ask it questions, and let it go down when the
//! `Lab` is dropped (also when an assertion panics). Run as root:
//!
//!     cargo run --example lab_test
//!
//! In a `#[test]`, the same lines go in the test function.

use tunbench::api::Lab;
use tunbench::measure::session::Overrides;

const TOPOLOGY: &str = r#"
name = "example"
[nodes.client]
kind = "host"
routes = [{ to = "default", via = "198.18.1.1" }]
[nodes.r1]
kind = "router"
[nodes.server]
kind = "host"
routes = [{ to = "default", via = "198.18.2.1" }]
[[links]]
a = { port = "client:eth0", ipv4 = "198.18.1.2/24" }
b = { port = "r1:eth0", ipv4 = "198.18.1.1/24" }
[[links]]
a = { port = "server:eth0", ipv4 = "198.18.2.2/24" }
b = { port = "r1:eth1", ipv4 = "198.18.2.1/24" }
mtu = 1400

[[measure]]
name = "raw"
from = "client"
to = "server"
families = ["ipv4"]
protocols = ["tcp"]

[[assert]]
name = "server-reachable"
kind = "reach"
from = "client"
to = "server"
family = "ipv4"

[[assert]]
name = "mtu-is-the-narrow-link"
kind = "path_mtu"
from = "client"
to = "server"
family = "ipv4"
equals = 1400
"#;

fn main() -> anyhow::Result<()> {
    let lab = Lab::up_str(TOPOLOGY)?;
    println!("lab {} is up", lab.name());

    let report = lab.check()?;
    assert_eq!(report.failures().count(), 0, "check: {report:?}");

    let route = lab.exec("client", "ip", &["route", "get", "198.18.2.2"])?;
    print!("{}", String::from_utf8_lossy(&route.stdout));

    for v in lab.assert_all()? {
        println!("{:?} {}: measured {}", v.outcome, v.name, v.measured);
    }

    let quick = Overrides {
        runs: Some(1),
        duration: Some(1.0),
        ..Default::default()
    };
    let results = lab.measure("raw", &quick)?;
    for p in &results.paths {
        for c in &p.cells {
            println!("{} {}: {:.0} Mbit/s", p.path, c.cell, c.best_bps / 1e6);
        }
    }
    // `lab` goes out of scope here and takes its namespaces with it.
    Ok(())
}
