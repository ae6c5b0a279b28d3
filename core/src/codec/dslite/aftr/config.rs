//! What an AFTR is told: its softwires, the NAT44 pool and ports, timeouts
//! and limits, and why a configuration is refused.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::time::Duration;

use ipnetwork::Ipv4Network;

use super::super::DEFAULT_INNER_MTU;

/// One B4 the AFTR serves, and the inner sources it may use (RFC 6333 section
/// 6.4: the AFTR may restrict them; 192.0.0.2 is always allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Softwire {
    pub b4: Ipv6Addr,
    pub prefixes: Vec<Ipv4Network>,
}

/// Idle time after which a NAT mapping ends, per protocol (RFC 4787 REQ-5 asks
/// at least 2 min for UDP; RFC 5382 asks 2 h 4 min for established TCP, which a
/// benchmark lab does not need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatTimeouts {
    pub tcp: Duration,
    pub udp: Duration,
    pub icmp: Duration,
}

impl Default for NatTimeouts {
    fn default() -> Self {
        NatTimeouts {
            tcp: Duration::from_secs(300),
            udp: Duration::from_secs(60),
            icmp: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AftrConfig {
    /// The AFTR's own IPv6 address (the B4s' tunnel destination).
    pub addr: Ipv6Addr,
    pub softwires: Vec<Softwire>,
    /// The NAT44 pool's external addresses.
    pub pool: Vec<Ipv4Addr>,
    /// External ports (and ICMP echo identifiers) a mapping may get.
    pub ports: RangeInclusive<u16>,
    /// The largest IPv4 packet sent into a softwire with DF set.
    pub inner_mtu: u16,
    pub timeouts: NatTimeouts,
    pub max_mappings: usize,
    /// Mappings one B4 may hold at once (RFC 6888 REQ-4: a limit per
    /// subscriber), so one B4 cannot take the whole table; beyond it a new
    /// flow from that B4 is dropped as `MappingLimit`.
    pub max_mappings_per_b4: usize,
}

/// The whole NAT table by default.
pub const DEFAULT_MAX_MAPPINGS: usize = 1 << 18;

/// A B4's share of the NAT table by default: ports enough for a busy home
/// (RFC 6888 leaves the number to the operator), 1/64 of the whole table.
pub const DEFAULT_MAX_MAPPINGS_PER_B4: usize = 4096;

impl AftrConfig {
    /// No softwires yet, ports 1024-65535, inner MTU 1460, timeouts TCP 300 s,
    /// UDP 60 s, ICMP 30 s, at most 262 144 mappings, 4096 of them per B4.
    pub fn new(addr: Ipv6Addr, pool: Vec<Ipv4Addr>) -> Self {
        AftrConfig {
            addr,
            softwires: Vec::new(),
            pool,
            ports: 1024..=65535,
            inner_mtu: DEFAULT_INNER_MTU,
            timeouts: NatTimeouts::default(),
            max_mappings: DEFAULT_MAX_MAPPINGS,
            max_mappings_per_b4: DEFAULT_MAX_MAPPINGS_PER_B4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AftrConfigError {
    #[error("the NAT44 pool is empty")]
    EmptyPool,
    #[error("pool address {0} is listed twice")]
    DuplicatePoolAddress(Ipv4Addr),
    #[error("the port range {0}-{1} is empty")]
    EmptyPortRange(u16, u16),
    #[error("softwire {0} is listed twice")]
    DuplicateSoftwire(Ipv6Addr),
    #[error("max_mappings is 0: no flow could pass")]
    NoMappings,
    #[error("max_mappings_per_b4 is 0: no flow could pass")]
    NoMappingsPerB4,
    #[error("inner MTU {0} is below IPv4's minimum of 68 bytes")]
    MtuTooSmall(u16),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::dslite::Aftr;
    use crate::codec::dslite::test_support::*;

    #[test]
    fn config_errors() {
        let mut c = aftr_config();
        c.pool.clear();
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::EmptyPool));
        let mut c = aftr_config();
        c.pool.push(POOL);
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::DuplicatePoolAddress(POOL))
        );
        let mut c = aftr_config();
        c.softwires.push(c.softwires[0].clone());
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::DuplicateSoftwire(B4_A))
        );
        let mut c = aftr_config();
        c.max_mappings = 0;
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::NoMappings));
        let mut c = aftr_config();
        c.inner_mtu = 60;
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::MtuTooSmall(60)));
        #[allow(clippy::reversed_empty_ranges)]
        let ports = 2000..=1000;
        let mut c = aftr_config();
        c.ports = ports;
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::EmptyPortRange(2000, 1000))
        );
    }
}
