//! The kernel phase: a source (the default Debian package, another Debian version, a tree, a
//! tarball, a git commit; patches on top) mirrored, configured from fragments, built into the
//! cache and checked. Its main type is `build::Built` (the image, its effective `.config`, its
//! metadata), which the VM and run phases boot.
//!
//! - `source`: what a source is and its identity; the private mirror and patches;
//! - `debian`: `linux-source-X` through a private apt configuration;
//! - `git`: a user's git tree, read only;
//! - `kconfig`: fragments, `.config` parsing, requested against effective;
//! - `cache`: the cache's location and a build's key;
//! - `knobs`: `LLVM=1`, `CC=`, `CROSS_COMPILE=`, ccache, extra make variables;
//! - `gcov`: a coverage build's GCOV objects and the notes kept with it;
//! - `image`: a boot image's arch and release from its header;
//! - `build`: one arch's build: configure, build, check, install (and prebuilt images);
//! - `request`: the phase's front door, `build_all`: a `Request` (the kernel flags lowered by
//!   `cli::kernel`) into a `Built` kernel per arch.

pub mod build;
pub mod cache;
pub mod debian;
pub mod gcov;
pub mod git;
pub mod image;
pub mod kconfig;
pub mod knobs;
pub mod request;
pub mod source;

pub use request::{build_all, Request};
