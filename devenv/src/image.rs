//! The metallb-rs container image: one static binary in a `FROM scratch`
//! image, built through the Docker API (bollard) from an in-memory context,
//! and loaded into kind.
//!
//! The text and argument lists (Dockerfile, labels, `cargo` and `kind`
//! arguments) and the ELF check are pure functions, tested here; the
//! runners ([`build_static_binary`], [`build_image`], [`load_into_kind`])
//! only execute them. No `docker build` shell-out: the engine's API is the
//! one dependency, so `DOCKER_HOST` works the same for every step.

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::query_parameters::{BuildImageOptionsBuilder, RemoveImageOptions};
use futures::StreamExt;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the released images live.
pub const DEFAULT_REGISTRY: &str = "ghcr.io/metallb-rs";

/// The image repository inside a registry.
pub const REPOSITORY: &str = "metallb-rs";

/// The tag dev environments build and load.
pub const DEV_TAG: &str = "dev";

/// Where the binary sits in the image (the entrypoint).
pub const BINARY_IN_IMAGE: &str = "/metallb-rs";

/// The user the image runs as: `nobody`, as the controller Deployment's
/// `runAsUser`. Pods that need more (the speaker's raw sockets) say so in
/// their security context.
pub const IMAGE_USER: &str = "65534:65534";

/// What the image's `org.opencontainers.image.source` points to.
pub const SOURCE: &str = "https://github.com/metallb-rs/metallb-rs";

/// `<registry>/metallb-rs:<tag>`, e.g. `ghcr.io/metallb-rs/metallb-rs:dev`.
pub fn reference(registry: &str, tag: &str) -> String {
    format!("{}/{REPOSITORY}:{tag}", registry.trim_end_matches('/'))
}

/// The target triple of the static build: the host's architecture with
/// glibc (`x86_64-unknown-linux-gnu` here). Images are built for the
/// machine that runs kind.
pub fn host_target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// The `CARGO_TARGET_DIR` of static builds: apart from the usual `target/`
/// because the `RUSTFLAGS` differ (sharing would rebuild everything each
/// switch), and so a build started from a running `cargo test` does not
/// wait for that test's lock on `target/`.
pub fn static_target_dir(project_root: &Path) -> PathBuf {
    project_root.join("target").join("static")
}

/// Whether `name` is one of the variables cargo sets for a binary or test
/// it runs (not configuration such as `CARGO_HOME` or `CARGO_TERM_*`).
pub fn inherited_from_cargo_run(name: &str) -> bool {
    matches!(
        name,
        "CARGO_MANIFEST_DIR"
            | "CARGO_MANIFEST_PATH"
            | "CARGO_CRATE_NAME"
            | "CARGO_BIN_NAME"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_TARGET_TMPDIR"
            | "CARGO_MANIFEST_LINKS"
    ) || name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_EXE_")
}

/// The cargo profile of the image binary (see the workspace `Cargo.toml`):
/// release, but a panic aborts the process, as a Go panic does upstream,
/// so Kubernetes restarts it rather than leaving a task dead.
pub const IMAGE_PROFILE: &str = "image";

/// The `cargo` arguments of the static release build for `target`.
pub fn cargo_build_args(target: &str) -> Vec<String> {
    [
        "build",
        "--profile",
        IMAGE_PROFILE,
        "-p",
        "metallb-rs",
        "--bin",
        "metallb-rs",
        // `validate` is a tool for users' machines, not for the pods.
        "--no-default-features",
        "--target",
        target,
    ]
    .map(String::from)
    .to_vec()
}

/// The `RUSTFLAGS` of the static build: glibc linked in, no loader, and
/// linked at a fixed address (not static-pie), so start-up applies no
/// relocations and the pointer tables stay clean, shared pages (see
/// `metallb-rs/build.rs`, which does the same for the dynamic build).
pub const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static -C relocation-model=static";

/// Builds the release `metallb-rs` binary statically linked for the host
/// (see [`host_target`]) under [`static_target_dir`] and returns its path,
/// after checking it needs no dynamic loader (a `FROM scratch` image has
/// none).
pub fn build_static_binary(project_root: &Path) -> anyhow::Result<PathBuf> {
    let target = host_target();
    let target_dir = static_target_dir(project_root);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = duct::cmd(&cargo, cargo_build_args(&target));
    // Variables cargo sets for the process it runs (this one, under `cargo
    // run` or `cargo test`) describe that package; build scripts such as
    // ring's track CARGO_MANIFEST_DIR, so inheriting them would rebuild
    // every dependency whenever xtask and the tests take turns.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(inherited_from_cargo_run) {
            command = command.env_remove(name);
        }
    }
    command
        .dir(project_root)
        .env("RUSTFLAGS", STATIC_RUSTFLAGS)
        .env("CARGO_TARGET_DIR", &target_dir)
        // It would take precedence over RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        // Output goes to the terminal as it comes; the status is checked.
        .stdout_to_stderr()
        .unchecked()
        .run()
        .with_context(|| format!("running {cargo}: is the Rust toolchain installed?"))
        .and_then(|out| {
            if out.status.success() {
                Ok(())
            } else {
                bail!(
                    "the static build failed ({}): see cargo's output above; it needs the \
                     {target} target and glibc's static libraries (libc6-dev)",
                    out.status
                )
            }
        })?;
    let binary = target_dir
        .join(&target)
        .join(IMAGE_PROFILE)
        .join("metallb-rs");
    let bytes = std::fs::read(&binary)
        .with_context(|| format!("reading the built {}", binary.display()))?;
    match elf_linkage(&bytes).with_context(|| binary.display().to_string())? {
        Linkage::Static => Ok(binary),
        Linkage::Dynamic { interpreter } => bail!(
            "{} is dynamically linked (loader {interpreter}) although built with RUSTFLAGS \
             {STATIC_RUSTFLAGS:?}: a FROM scratch image cannot run it; does the {target} target \
             support crt-static?",
            binary.display()
        ),
    }
}

/// How an ELF executable is loaded.
#[derive(Debug, PartialEq, Eq)]
pub enum Linkage {
    /// No program interpreter: runs without a dynamic loader (static or
    /// static-pie).
    Static,
    /// Needs the dynamic loader at `interpreter` (a `PT_INTERP` header).
    Dynamic {
        /// The loader's path, e.g. `/lib64/ld-linux-x86-64.so.2`.
        interpreter: String,
    },
}

/// Why a file could not be read as ELF.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    /// The magic number is missing.
    #[error("not an ELF file (no \\x7fELF magic)")]
    NotElf,
    /// A header points past the end of the file.
    #[error("truncated ELF file: {what} lies past its end ({len} bytes)")]
    Truncated {
        /// The part that is missing.
        what: &'static str,
        /// The file's length.
        len: usize,
    },
    /// A header field has a value this reader does not know.
    #[error("unsupported ELF {field} {value}")]
    Unsupported {
        /// `class` or `data encoding`.
        field: &'static str,
        /// The value found.
        value: u8,
    },
}

const PT_INTERP: u32 = 3;

/// Reads the program headers of an ELF file (32 or 64-bit, either byte
/// order) and says whether it asks for a dynamic loader.
pub fn elf_linkage(bytes: &[u8]) -> Result<Linkage, ElfError> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(ElfError::NotElf);
    }
    let truncated = |what| ElfError::Truncated {
        what,
        len: bytes.len(),
    };
    let wide = match bytes.get(4).copied() {
        Some(1) => false,
        Some(2) => true,
        Some(value) => {
            return Err(ElfError::Unsupported {
                field: "class",
                value,
            });
        }
        None => return Err(truncated("the identification")),
    };
    let little = match bytes.get(5).copied() {
        Some(1) => true,
        Some(2) => false,
        Some(value) => {
            return Err(ElfError::Unsupported {
                field: "data encoding",
                value,
            });
        }
        None => return Err(truncated("the identification")),
    };
    let read = |offset: u64, size: usize, what: &'static str| -> Result<u64, ElfError> {
        let start = usize::try_from(offset).map_err(|_| truncated(what))?;
        let field = start
            .checked_add(size)
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| truncated(what))?;
        Ok(field.iter().enumerate().fold(0u64, |acc, (i, &b)| {
            let shift = 8 * if little { i } else { size - 1 - i };
            acc | (u64::from(b) << shift)
        }))
    };
    // (e_phoff, e_phentsize, e_phnum) and, inside a program header,
    // (p_offset, p_filesz) with the width of each.
    let (phoff, phentsize, phnum, p_offset, p_filesz, word) = if wide {
        (
            read(0x20, 8, "e_phoff")?,
            read(0x36, 2, "e_phentsize")?,
            read(0x38, 2, "e_phnum")?,
            0x08,
            0x20,
            8,
        )
    } else {
        (
            read(0x1c, 4, "e_phoff")?,
            read(0x2a, 2, "e_phentsize")?,
            read(0x2c, 2, "e_phnum")?,
            0x04,
            0x10,
            4,
        )
    };
    for i in 0..phnum {
        let header = phoff
            .checked_add(i * phentsize)
            .ok_or_else(|| truncated("a program header"))?;
        if read(header, 4, "a program header")? != u64::from(PT_INTERP) {
            continue;
        }
        let start = read(header + p_offset, word, "a program header")?;
        let len = read(header + p_filesz, word, "a program header")?;
        let path = usize::try_from(start)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(start, len)| bytes.get(start..start.checked_add(len)?))
            .ok_or_else(|| truncated("the interpreter path"))?;
        let interpreter = String::from_utf8_lossy(path)
            .trim_end_matches('\0')
            .to_owned();
        return Ok(Linkage::Dynamic { interpreter });
    }
    Ok(Linkage::Static)
}

/// The OCI labels of an image of `version` built from git `revision`.
pub fn oci_labels(version: &str, revision: &str) -> BTreeMap<String, String> {
    [
        ("org.opencontainers.image.title", "metallb-rs"),
        ("org.opencontainers.image.source", SOURCE),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.revision", revision),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// [`oci_labels`] for the tree at `project_root`: the crate version (the
/// workspace's, which metallb-rs shares) and [`git_revision`].
pub fn labels(project_root: &Path) -> BTreeMap<String, String> {
    oci_labels(env!("CARGO_PKG_VERSION"), &git_revision(project_root))
}

/// The commit at `project_root` (`git rev-parse HEAD`), with `-dirty` when
/// the tree differs from it (untracked files count: they may be built in);
/// `unknown` when it is not a git tree or git is missing.
pub fn git_revision(project_root: &Path) -> String {
    let git = |args: &[&str]| {
        duct::cmd("git", args)
            .dir(project_root)
            .stdout_capture()
            .stderr_null()
            .read()
            .ok()
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) if !commit.trim().is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_none_or(|s| !s.trim().is_empty());
            format!("{}{}", commit.trim(), if dirty { "-dirty" } else { "" })
        }
        _ => "unknown".to_owned(),
    }
}

/// The Dockerfile of the image: the binary (context file `metallb-rs`) as
/// entrypoint, run as [`IMAGE_USER`], with `labels` in one `LABEL`
/// instruction (quoted, so values may hold spaces and quotes).
pub fn dockerfile(labels: &BTreeMap<String, String>) -> Result<String, ImageError> {
    let mut text = format!(
        "FROM scratch\nCOPY metallb-rs {BINARY_IN_IMAGE}\nUSER {IMAGE_USER}\nENTRYPOINT [\"{BINARY_IN_IMAGE}\"]\n"
    );
    let mut separator = "LABEL";
    for (key, value) in labels {
        let bad = |reason: &str| ImageError::BadLabel {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        if key.is_empty()
            || key
                .chars()
                .any(|c| c.is_whitespace() || c == '=' || c == '"')
        {
            return Err(bad("keys may not be empty or hold whitespace, '=' or '\"'"));
        }
        if value.chars().any(char::is_control) {
            return Err(bad("values may not hold control characters (newlines)"));
        }
        let value = value.replace('\\', "\\\\").replace('"', "\\\"");
        // Infallible: writing to a String.
        let _ = write!(text, "{separator} {key}=\"{value}\"");
        separator = " \\\n     ";
    }
    if !labels.is_empty() {
        text.push('\n');
    }
    Ok(text)
}

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The binary could not be read.
    #[error("reading the binary {path}: {cause}: build it first (build_static_binary)")]
    ReadBinary {
        /// The binary's path.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// A label cannot be written into a Dockerfile.
    #[error("image label {key:?}: {reason}")]
    BadLabel {
        /// The label's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The tar context could not be written.
    #[error("packing the build context: {cause}")]
    Context {
        /// What the tar writer said.
        cause: std::io::Error,
    },
    /// The engine reported a failed step.
    #[error("docker build of {reference} failed: {message}{}", output_tail(.output))]
    BuildFailed {
        /// The image being built.
        reference: String,
        /// The engine's error message.
        message: String,
        /// The last lines of build output before it.
        output: Vec<String>,
    },
    /// The engine could not be asked (connection lost, API refusal).
    #[error("docker: {action} {reference}: {cause}")]
    Api {
        /// What we asked for.
        action: &'static str,
        /// The image.
        reference: String,
        /// What bollard saw.
        cause: bollard::errors::Error,
    },
}

fn output_tail(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; last output:\n  {}", lines.join("\n  "))
    }
}

/// An image the engine now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImage {
    /// The name it is tagged with.
    pub reference: String,
    /// The engine's image ID (`sha256:...`).
    pub id: String,
    /// Its size as the engine reports it.
    pub size_bytes: u64,
}

/// How many lines of build output an error keeps.
const OUTPUT_KEPT: usize = 20;

/// Builds image `reference` from `binary` (see [`dockerfile`]) with the
/// engine's classic builder, which needs no registry for `FROM scratch`.
/// Build output is logged (tracing, info) line by line; a failed step
/// becomes [`ImageError::BuildFailed`] with the engine's message. The image
/// the tag pointed to before is removed when nothing else uses it, so
/// rebuilds (each commit changes the revision label) leave no dangling
/// 20 MiB images behind.
pub async fn build_image(
    docker: &Docker,
    binary: &Path,
    reference: &str,
    labels: &BTreeMap<String, String>,
) -> Result<BuiltImage, ImageError> {
    let context = build_context(binary, &dockerfile(labels)?)?;
    let previous = docker
        .inspect_image(reference)
        .await
        .ok()
        .and_then(|i| i.id);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(reference)
        .rm(true)
        .forcerm(true)
        .build();
    let mut output: VecDeque<String> = VecDeque::with_capacity(OUTPUT_KEPT);
    let failed = |message: String, output: &VecDeque<String>| ImageError::BuildFailed {
        reference: reference.to_owned(),
        message: message.trim_end().to_owned(),
        output: output.iter().cloned().collect(),
    };
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = match item {
            Ok(info) => info,
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                return Err(failed(error, &output));
            }
            Err(cause) => {
                return Err(ImageError::Api {
                    action: "build",
                    reference: reference.to_owned(),
                    cause,
                });
            }
        };
        if let Some(detail) = info.error_detail {
            let message = detail
                .message
                .unwrap_or_else(|| format!("error code {}", detail.code.unwrap_or_default()));
            return Err(failed(message, &output));
        }
        for line in info
            .stream
            .iter()
            .chain(&info.status)
            .flat_map(|s| s.lines())
        {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            tracing::info!(image = %reference, "{line}");
            if output.len() == OUTPUT_KEPT {
                output.pop_front();
            }
            output.push_back(line.to_owned());
        }
    }
    let inspect = docker
        .inspect_image(reference)
        .await
        .map_err(|cause| ImageError::Api {
            action: "inspect the built image",
            reference: reference.to_owned(),
            cause,
        })?;
    let id = inspect.id.unwrap_or_default();
    if let Some(previous) = previous.filter(|p| *p != id) {
        // Refused (and left alone) while a container or another tag uses it.
        if let Err(e) = docker
            .remove_image(&previous, None::<RemoveImageOptions>, None)
            .await
        {
            tracing::debug!(image = %previous, "previous image of {reference} kept: {e}");
        }
    }
    Ok(BuiltImage {
        reference: reference.to_owned(),
        id,
        size_bytes: inspect
            .size
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or_default(),
    })
}

/// The whole build from a source tree, into the engine at
/// [`crate::docker::docker_host`]: [`build_static_binary`] (on a blocking
/// thread: it takes minutes cold), then [`build_image`] of `reference`
/// with the tree's [`labels`]. What `cargo xtask build-images` and the kind
/// dev-env run.
pub async fn build_from_source(project_root: &Path, reference: &str) -> anyhow::Result<BuiltImage> {
    // Connect first: no point compiling for minutes when no engine answers.
    let docker = crate::docker::connect().await?;
    let root = project_root.to_owned();
    let binary = tokio::task::spawn_blocking(move || build_static_binary(&root))
        .await
        .context("the static build's thread panicked")??;
    Ok(build_image(&docker, &binary, reference, &labels(project_root)).await?)
}

/// The build context: `Dockerfile` and the binary as `metallb-rs` (mode
/// 0755, owned by root, time 0 so equal binaries make equal contexts).
fn build_context(binary: &Path, dockerfile: &str) -> Result<Vec<u8>, ImageError> {
    let bytes = std::fs::read(binary).map_err(|cause| ImageError::ReadBinary {
        path: binary.to_owned(),
        cause,
    })?;
    let mut tar = tar::Builder::new(Vec::new());
    let mut append = |name: &str, mode: u32, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, data)
    };
    append("Dockerfile", 0o644, dockerfile.as_bytes())
        .and_then(|()| append("metallb-rs", 0o755, &bytes))
        .map_err(|cause| ImageError::Context { cause })?;
    tar.into_inner()
        .map_err(|cause| ImageError::Context { cause })
}

/// The `kind` arguments that load image `reference` into cluster `cluster`.
pub fn kind_load_args(cluster: &str, reference: &str) -> Vec<String> {
    ["load", "docker-image", reference, "--name", cluster]
        .map(String::from)
        .to_vec()
}

/// `kind load docker-image <reference> --name <cluster>`: copies the image
/// from the engine into every node of the cluster.
pub fn load_into_kind(cluster: &str, reference: &str) -> anyhow::Result<()> {
    let out = duct::cmd("kind", kind_load_args(cluster, reference))
        .stdout_to_stderr()
        .unchecked()
        .run()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "kind is not installed (not on PATH): install it from https://kind.sigs.k8s.io/"
            ),
            _ => anyhow::Error::new(e).context("running kind"),
        })?;
    if !out.status.success() {
        bail!(
            "kind load docker-image {reference} --name {cluster} failed ({}): is the cluster \
             {cluster:?} up (`kind get clusters`)?",
            out.status
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
