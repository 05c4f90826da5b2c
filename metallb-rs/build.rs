//! Links the `metallb-rs` binary as a position-dependent executable.
//!
//! A position-independent executable (the toolchain's default) carries
//! about 2 MB of relocations that the loader applies at every start: it
//! reads all of them and dirties every page of pointer tables they patch
//! (`.data.rel.ro`), which stays resident in each speaker and controller
//! for their whole life. Linked at a fixed address, the linker resolves
//! those pointers once and the pages stay clean, shared with the page
//! cache and only read when used. MetalLB's Go binaries are not
//! position-independent either.
//!
//! The static image build (`+crt-static`) gets the same from
//! `-C relocation-model=static` in its `RUSTFLAGS` instead: glibc's
//! static-pie start-up code cannot run linked as `-no-pie`.

fn main() {
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let static_crt = features.split(',').any(|f| f == "crt-static");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && !static_crt {
        println!("cargo:rustc-link-arg-bin=metallb-rs=-no-pie");
    }
    // Its only input is the target, which cargo already keys builds by.
    println!("cargo:rerun-if-changed=build.rs");
}
