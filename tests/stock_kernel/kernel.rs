//! Which kernel the tests run on: a stock one, with the modules the tests need.

use std::path::Path;

/// What the tests exercise, as the kernel's build options (`y` or `m`).
const NEEDED: &[&str] = &[
    "CONFIG_WIREGUARD",
    "CONFIG_INET_ESP",
    "CONFIG_XFRM_USER",
    "CONFIG_IPV6_SEG6_LWTUNNEL",
    "CONFIG_NF_CONNTRACK",
    "CONFIG_NET_SCH_NETEM",
    "CONFIG_NET_SCH_CAKE",
    "CONFIG_VLAN_8021Q",
    "CONFIG_IPVLAN",
];

/// Panics unless this kernel was built with what the stock-kernel tests
/// exercise (its /boot/config-RELEASE says), naming how to run them; the
/// kernel's release.
pub fn stock_kernel() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("reading the kernel's release")
        .trim()
        .to_string();
    let config = std::fs::read_to_string(Path::new("/boot").join(format!("config-{release}")))
        .unwrap_or_default();
    let missing: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|o| {
            !config
                .lines()
                .any(|l| l == format!("{o}=y") || l == format!("{o}=m"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "these tests run on a stock Debian kernel, and {release} lacks {missing:?}: \
         run them with bash scripts/test.sh, which boots one in a VM"
    );
    release
}

#[test]
fn the_tests_run_on_a_stock_kernel_with_its_modules() {
    let release = stock_kernel();
    // The tests' own kernel is never the development machine's: Debian's
    // releases end in their flavour.
    assert!(
        release.ends_with("-amd64") || release.ends_with("-arm64"),
        "{release}"
    );
}
