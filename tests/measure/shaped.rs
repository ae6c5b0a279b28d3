//! What a shaped link lets through, from physics: the measurement tests hold
//! their figures to it, so a verdict never depends on how fast this machine
//! is. A rate of `impairments = { rate }` (or `shape` here, on a veth outside
//! a lab) is a kernel TBF charging every Ethernet frame its bytes on the
//! wire, with a bucket of 10 ms of the rate.

use tunbench::topology::impair::{Shaping, shaping_lines};
use tunbench::vocab::Family;
use tunbench::vocab::framing::Framing;

/// Bytes an Ethernet frame costs beyond its IP packet: header 14, FCS 4,
/// preamble 8 and the gap of 12.
const ETHERNET_BEYOND_IP: f64 = 38.0;
/// TCP's header with the timestamps Linux sends.
const TCP_HEADER: f64 = 32.0;
const UDP_HEADER: f64 = 8.0;
/// The links' MTU.
const MTU: f64 = 1500.0;

fn ip_header(f: Family) -> f64 {
    match f {
        Family::Ipv4 => 20.0,
        Family::Ipv6 => 40.0,
    }
}

/// Payload bit/s a link of `rate` carries when every frame holds `payload`
/// bytes in an IP packet of `ip_len`.
fn goodput(rate: f64, payload: f64, ip_len: f64) -> f64 {
    rate * payload / (ip_len + ETHERNET_BEYOND_IP)
}

/// TCP's payload bit/s over a link of `rate`: full 1500-byte packets.
pub fn tcp_goodput(rate: f64, f: Family) -> f64 {
    goodput(rate, MTU - ip_header(f) - TCP_HEADER, MTU)
}

/// UDP's payload bit/s over a link of `rate` in datagrams of `len` bytes.
pub fn udp_goodput(rate: f64, len: f64, f: Family) -> f64 {
    goodput(rate, len, len + UDP_HEADER + ip_header(f))
}

/// How much later than the sender's the receiver's clock may start (its
/// TEST_START arrives after the sender's went out): traffic meanwhile is
/// counted in less time. Far longer than a wake-up takes.
const START_LAG: f64 = 0.1;

/// The most payload bit/s a receiver counts over `secs` through a link
/// whose goodput is `goodput` at line rate `rate`: the goodput over the
/// test and `START_LAG`, and the bucket's 10 ms of the rate, which passes
/// at once. Load cannot raise it: a late read only moves bytes later.
pub fn most(goodput: f64, rate: f64, secs: f64) -> f64 {
    let bucket = goodput * (rate / 100.0).max(2.0 * 1518.0 * 8.0) / rate;
    goodput * (1.0 + START_LAG / secs) + bucket / secs
}

/// Shapes what `dev` in namespace `ns` sends to `rate` bit/s as a lab link
/// of that rate is shaped (tunbench's own tc lines), and steers what it
/// receives by flow, as a lab does on a shaped link, so one flow keeps its
/// order.
pub fn shape(ns: &str, dev: &str, rate: u64) {
    let lines = shaping_lines(
        &Shaping {
            dev,
            rate,
            framing: Framing::Ethernet,
            mtu: MTU as u32,
            queue_bytes: None,
        },
        "add",
    );
    netns::tc::run(ns, &lines).unwrap_or_else(|e| panic!("shaping {dev} in {ns}: {e}"));
    netns::steer::by_flow(ns, dev).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn goodput_is_the_payloads_share_of_the_wire() {
    // 1448 of 1538 bytes, and 1448 of 1514.
    assert_eq!(tcp_goodput(1538e6, Family::Ipv4), 1448e6);
    assert_eq!(udp_goodput(1514e6, 1448.0, Family::Ipv4), 1448e6);
    assert_eq!(tcp_goodput(1538e6, Family::Ipv6), 1428e6);
}
