//! The kernel DS-Lite softwire on a freshly booted stock kernel.
