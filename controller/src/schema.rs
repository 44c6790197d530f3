//! Whether the served InferenceReplica schema lets the `Spread` condition sit beside OME's
//! status. A server-side apply of one condition merges into OME's conditions only where `status`
//! is a granular map and `status.conditions` a list map keyed by `type`, as OME v1.3's full CRD
//! declares. On OME's minimal CRD (`status` `x-kubernetes-map-type: atomic`) kube-apiserver
//! v1.35.8 replaces the whole status with the applied one, dropping every field OME wrote; the
//! controller then writes no condition, and says why. The schema is read as OME's own
//! schemapreflight reads it: the OpenAPI v3 document of `ome.io/v1beta1`, which every
//! authenticated user may read (`system:discovery`).

use serde_json::{Value, json};

/// Where the API server serves the group's OpenAPI v3 document.
pub const OPENAPI_PATH: &str = "/openapi/v3/apis/ome.io/v1beta1";

/// Ok when a condition applied by its own field manager keeps OME's status; else why not.
pub fn condition_merges(document: &Value) -> Result<(), String> {
    let gvk = json!({"group": "ome.io", "version": "v1beta1", "kind": "InferenceReplica"});
    let serves_replica = |kinds: &Value| kinds.as_array().is_some_and(|kinds| kinds.contains(&gvk));
    let schemas = document["components"]["schemas"].as_object();
    let replica = (schemas.into_iter().flat_map(|schemas| schemas.values()))
        .find(|schema| serves_replica(&schema["x-kubernetes-group-version-kind"]))
        .ok_or("the API server serves no InferenceReplica schema in ome.io/v1beta1")?;
    let status = &replica["properties"]["status"];
    let conditions = &status["properties"]["conditions"];
    let keyed_by_type =
        conditions["x-kubernetes-list-type"] == "map" && conditions["x-kubernetes-list-map-keys"] == json!(["type"]);
    let replaced = if status["x-kubernetes-map-type"] == "atomic" {
        "declares status atomic (OME's minimal CRD): applying the Spread condition would replace OME's whole status"
    } else if !keyed_by_type {
        "does not declare status.conditions a list map keyed by type: applying the Spread condition would replace \
            OME's conditions"
    } else {
        return Ok(());
    };
    Err(format!("the InferenceReplica CRD {replaced}; install OME's full CRDs"))
}

/// The served OpenAPI v3 document of `ome.io/v1beta1`.
pub async fn served(client: &kube::Client) -> Result<Value, kube::Error> {
    let request = http::Request::get(OPENAPI_PATH)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documents kube-apiserver v1.35.8 served for cluster/ome-crds.yaml and for
    /// cluster/ome-crd-inferencereplica-minimal.yaml, cut to the InferenceReplica's status.
    fn served(file: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/openapi")
            .join(file);
        serde_json::from_str(&std::fs::read_to_string(path).expect("recorded document")).expect("json")
    }

    #[test]
    fn the_full_crd_lets_the_condition_merge() {
        assert_eq!(condition_merges(&served("full.json")), Ok(()));
    }

    #[test]
    fn the_minimal_crd_is_refused_saying_why() {
        assert_eq!(
            condition_merges(&served("minimal.json")),
            Err(
                "the InferenceReplica CRD declares status atomic (OME's minimal CRD): applying the Spread \
                 condition would replace OME's whole status; install OME's full CRDs"
                    .into()
            )
        );
    }

    #[test]
    fn conditions_not_keyed_by_type_are_refused() {
        let mut document = served("full.json");
        let conditions = &mut document["components"]["schemas"]["io.ome.v1beta1.InferenceReplica"]["properties"]["status"]
            ["properties"]["conditions"];
        conditions["x-kubernetes-list-type"] = "atomic".into();
        assert_eq!(
            condition_merges(&document),
            Err(
                "the InferenceReplica CRD does not declare status.conditions a list map keyed by type: \
                 applying the Spread condition would replace OME's conditions; install OME's full CRDs"
                    .into()
            )
        );
    }

    #[test]
    fn no_replica_schema_is_said() {
        assert_eq!(
            condition_merges(&serde_json::json!({"components": {"schemas": {}}})),
            Err("the API server serves no InferenceReplica schema in ome.io/v1beta1".into())
        );
    }
}
