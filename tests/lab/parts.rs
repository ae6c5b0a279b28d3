//! Helpers of the tests of labs placed on several hosts (crate::emulated):
//! tunbench run on an emulated host, and every host's part taken down on
//! drop, so no datapath or server outlives a failed test (the hosts'
//! namespaces go with the hosts themselves).

use crate::common::bin;
use crate::emulated::Host;
use std::process::Output;

/// `tunbench ARGS` on emulated host `h`.
pub fn on(h: &Host, args: &[&str]) -> Output {
    h.command(bin())
        .args(args)
        .output()
        .expect("running tunbench on an emulated host")
}

/// Runs `tunbench down LAB` on every host on drop.
pub struct Parts<'a> {
    pub hosts: &'a [Host],
    pub lab: String,
}

impl Drop for Parts<'_> {
    fn drop(&mut self) {
        for h in self.hosts {
            let _ = on(h, &["down", &self.lab]);
        }
    }
}
