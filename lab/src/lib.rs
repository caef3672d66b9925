//! The rehearsal lab (`bootstrap-lab`), a crate of its own so that the site binary carries none
//! of it: it reaches the site's code only through the `bootstrap` library's public API.
//! `bootstrap-lab seed` builds a realistic, scaled-down upstream in a
//! local registry (OpenShift release payloads with an update graph, an operator catalog whose
//! bundles and related images all exist, a modelcar), so mirroring releases and catalogs can be
//! rehearsed and tested without Red Hat's registries.
//! `bootstrap-lab up|down|status` ([`site`]) gives the install pipeline a site on one machine: Redfish
//! BMCs, a machine network of namespaces, the rendezvous and cluster API listeners.

pub mod bigcatalog;
pub mod catalog;
pub mod cli;
pub mod commands;
pub mod image;
pub mod modelcar;
pub mod nodeimage;
pub mod oc;
pub mod push;
pub mod release;
pub mod seed;
pub mod site;
pub mod standin;

pub use seed::seed;

#[cfg(test)]
mod tests {
    use bootstrap::mirror::config;
    use bootstrap::mirror::resolve::select;
    use bootstrap::openshift::fbc::Catalog;
    use bootstrap::openshift::graph::{ChannelQuery, Graph};

    const LAB_YAML: &str = include_str!("../../mirrorsets/lab.yaml");
    const HOST: &str = "127.0.0.1:5000";

    /// mirrorsets/lab.yaml parses, and what it selects from the seeded upstream is what
    /// docs/lab.md says: two releases, the channel heads plus nfd, the modelcar.
    #[test]
    fn the_lab_image_set_selects_from_the_seeded_upstream() {
        let isc = config::parse(LAB_YAML, "mirrorsets/lab.yaml").unwrap();
        let releases =
            super::release::build(HOST, std::path::Path::new("/usr/bin/bootstrap")).unwrap();
        let graph = serde_json::to_vec(&super::release::graph(HOST, &releases)).unwrap();
        let graph = Graph::from_json(&graph, "graph.json").unwrap();
        let chosen: Vec<String> = graph
            .releases(
                &ChannelQuery::from(&isc.mirror.platform.channels[0]),
                "mirror.platform.channels[0]",
            )
            .unwrap()
            .into_iter()
            .map(|r| r.version.to_string())
            .collect();
        assert_eq!(chosen, ["4.18.2", "4.18.3"]);

        let built = super::catalog::build(HOST).unwrap();
        let operator = &isc.mirror.operators[0];
        assert_eq!(operator.catalog, built.image.tagged(HOST));
        let catalog = Catalog::parse(&built.files).unwrap();
        let selection =
            select::select(&catalog, operator, 0, select::Dependencies::Report).unwrap();
        let names = selection.bundle_names();
        assert_eq!(
            names["gpu-operator-certified"],
            ["gpu-operator-certified.v24.9.1"]
        );
        assert_eq!(names["nfd"], ["nfd.4.18.0-202503041405"]);
        assert_eq!(
            names["openshift-gitops-operator"],
            ["openshift-gitops-operator.v1.15.1"]
        );
        assert_eq!(names["rhods-operator"], ["rhods-operator.2.17.0"]);
        assert!(names.contains_key("nvidia-network-operator"), "{names:?}");
        assert_eq!(names.len(), 7);

        let model = &isc.mirror.additional_images[0].name;
        assert_eq!(
            model,
            &format!(
                "{HOST}/{}:{}",
                super::modelcar::MODEL_REPO,
                super::modelcar::MODEL_TAG
            )
        );
    }
}
