//! The image built from this tree: what it holds, and what rebuilding a
//! tag leaves behind.

use crate::harness::{Built, Cleanup, built_image, engine, run, unique};
use devenv::image;

#[test]
fn image_has_the_labels_the_user_and_the_entrypoint() {
    run(async {
        let Some(docker) = engine().await else { return };
        let Built {
            image: built, took, ..
        } = built_image().await;
        println!(
            "image {} is {} bytes ({:.1} MiB), built in {took:.1?}",
            built.reference,
            built.size_bytes,
            built.size_bytes as f64 / (1024.0 * 1024.0)
        );
        let inspect = docker
            .inspect_image(&built.reference)
            .await
            .expect("inspect image");
        assert_eq!(inspect.id.as_deref(), Some(built.id.as_str()));
        let config = inspect.config.expect("image config");
        assert_eq!(config.user.as_deref(), Some(image::IMAGE_USER));
        assert_eq!(
            config.entrypoint,
            Some(vec![image::BINARY_IN_IMAGE.to_owned()])
        );
        let labels = config.labels.unwrap_or_default();
        for (key, value) in image::labels(&devenv::project_root()) {
            assert_eq!(labels.get(&key), Some(&value), "label {key}");
        }
        assert_eq!(
            labels
                .get("org.opencontainers.image.version")
                .map(String::as_str),
            Some(env!("CARGO_PKG_VERSION"))
        );
        // One layer: the binary.
        let layers = inspect.root_fs.and_then(|r| r.layers).unwrap_or_default();
        assert_eq!(layers.len(), 1, "{layers:?}");
        assert!(built.size_bytes > 1_000_000, "{}", built.size_bytes);
    })
}

#[test]
fn rebuilding_a_tag_removes_the_image_it_replaced() {
    run(async {
        let Some(docker) = engine().await else { return };
        let built = built_image().await;
        let cleanup = Cleanup::default();
        let reference = image::reference(image::DEFAULT_REGISTRY, &unique("test-rebuild"));
        cleanup.image(&reference);
        let mut labels = image::labels(&devenv::project_root());
        let mut ids = Vec::new();
        for run in ["first", "second"] {
            labels.insert("dev.metallb-rs.test.run".into(), run.into());
            let rebuilt = image::build_image(&docker, &built.binary, &reference, &labels)
                .await
                .unwrap_or_else(|e| panic!("{run} build: {e}"));
            cleanup.image(&rebuilt.id);
            ids.push(rebuilt.id);
        }
        assert_ne!(ids[0], ids[1], "the label differs, so does the image");
        assert!(
            docker.inspect_image(&ids[0]).await.is_err(),
            "{} is still there",
            ids[0]
        );
        assert!(docker.inspect_image(&reference).await.is_ok());
    })
}
