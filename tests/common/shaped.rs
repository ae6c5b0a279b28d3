//! What a shaped link lets through, from physics: the measurement tests hold
//! their figures to it, so a verdict never depends on how fast this machine
//! is. A rate of `impairments = { rate }` (or `shape` here, on a veth outside
//! a lab) is a kernel TBF charging every Ethernet frame its bytes on the
//! wire, with a bucket of 10 ms of the rate.

use tunbench::topology::impair::{Shaper, Shaping, shaping_lines};
use tunbench::vocab::Family;
use tunbench::vocab::framing::Framing;

/// Bytes an Ethernet frame costs beyond its IP packet: header 14, FCS 4,
/// preamble 8 and the gap of 12.
pub const ETHERNET_BEYOND_IP: f64 = 38.0;
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

/// How much later than the sender's the receiver's clock may start: it starts
/// once the TEST_START message has reached it, the sender's as it sends it;
/// traffic that passed meanwhile is counted in less time. Far longer than a
/// wake-up takes, even on a loaded machine.
pub const START_LAG: f64 = 0.1;

/// The bucket of a link's TBF shaped to `rate` bit/s, in bits charged on the
/// wire: 10 ms of the rate, at least two frames of a 1500-byte MTU
/// (topology::impair::shaping_lines).
pub fn tbf_bucket(rate: f64) -> f64 {
    (rate / 8.0 / 100.0).max(2.0 * 1518.0) * 8.0
}

/// The most wire bit/s a shaper of `rate` with a bucket of `bucket` bits lets
/// a receiver count over `secs` of its own clock. Over any span a token
/// bucket passes at most its rate times the span plus the bucket (full at the
/// start, and again after any pause; a relay that paces each frame after the
/// one before has a bucket of one frame), so dropping the first interval would
/// not take the bucket out of the bound. A read later than an arrival only
/// moves bytes later, so load cannot raise the count; but the sender starts
/// up to `START_LAG` before the receiver's clock, and what passed meanwhile
/// is counted too.
pub fn shaped_most(rate: f64, bucket: f64, secs: f64) -> f64 {
    rate * (1.0 + START_LAG / secs) + bucket / secs
}

/// The most payload bit/s a receiver counts over `secs` through a TBF link of
/// line rate `rate` whose goodput is `goodput`: `shaped_most` in payload.
pub fn most(goodput: f64, rate: f64, secs: f64) -> f64 {
    shaped_most(rate, tbf_bucket(rate), secs) * goodput / rate
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
            shaper: Shaper::Tbf,
        },
        "add",
    );
    netns::tc::run(ns, &lines).unwrap_or_else(|e| panic!("shaping {dev} in {ns}: {e}"));
    netns::steer::by_flow(ns, dev).unwrap_or_else(|e| panic!("{e}"));
}
