//! The Debian package end to end, as root: built from the release binary under
//! test, installed with apt-get, run from /usr/bin, then purged.

#[path = "../common/mod.rs"]
mod common;

mod deb;
