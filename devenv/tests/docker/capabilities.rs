//! Which user a capability added to the image's container is effective
//! for.

use crate::harness::{engine, pause, run, start, unique};
use bollard::Docker;
use devenv::image;
use testcontainers::{ContainerRequest, GenericImage, ImageExt};

/// CapEff of the process of container `name`, read from the host's /proc;
/// `None` when the engine runs elsewhere (or in another PID namespace).
async fn effective_capabilities(docker: &Docker, name: &str) -> Option<u64> {
    let pid = docker
        .inspect_container(name, None)
        .await
        .ok()?
        .state?
        .pid?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Why the speaker's container sets `runAsUser: 0`: the image runs as
/// 65534, and a capability added for a non-root user is not effective (no
/// ambient capabilities), so the speaker would lose its raw sockets.
#[test]
fn net_raw_is_effective_only_for_root() {
    run(async {
        let Some(docker) = engine().await else { return };
        let prefix = unique("devenv-test-caps");
        const CAP_NET_RAW: u64 = 1 << 13;
        // The speaker container's security context, without its host network.
        let speaker_like = |request: ContainerRequest<GenericImage>| {
            request
                .with_network("none")
                .with_cap_drop("ALL")
                .with_cap_add("NET_RAW")
        };
        let image_user = format!("{prefix}-image-user");
        let _image_user = start(&docker, speaker_like(pause(&docker, &image_user).await)).await;
        let root = format!("{prefix}-root");
        let _root = start(
            &docker,
            speaker_like(pause(&docker, &root).await).with_user("0:0"),
        )
        .await;
        let (Some(as_image_user), Some(as_root)) = (
            effective_capabilities(&docker, &image_user).await,
            effective_capabilities(&docker, &root).await,
        ) else {
            devenv::prereq::skip(
                "the containers' /proc/<pid>/status is not readable here (remote engine?)",
            );
            return;
        };
        assert_eq!(
            as_image_user & CAP_NET_RAW,
            0,
            "CapEff {as_image_user:x} as {}",
            image::IMAGE_USER
        );
        assert_eq!(
            as_root & CAP_NET_RAW,
            CAP_NET_RAW,
            "CapEff {as_root:x} as root"
        );
    })
}
