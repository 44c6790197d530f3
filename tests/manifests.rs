//! metadata.yml, artifacthub-pkg.yml and policy.yaml describe one policy: they must agree with
//! each other, with the code, and with the least privilege the controller's RBAC promises.

use serde_json::{Value, json};

fn yaml_documents(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn yaml(file: &str) -> Value {
    yaml_documents(file).remove(0)
}

fn policy() -> Value {
    yaml_documents("policy.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ClusterAdmissionPolicy")
        .expect("the policy")
}

fn artifacthub_annotation(name: &str) -> Value {
    let text = yaml("artifacthub-pkg.yml")["annotations"][name]
        .as_str()
        .map(str::to_owned)
        .expect(name);
    serde_saphyr::from_str(&text).expect("annotation YAML")
}

#[test]
fn rules_are_pod_create_only_everywhere() {
    let pod_create =
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]);
    assert_eq!(yaml("metadata.yml")["rules"], pod_create);
    assert_eq!(policy()["spec"]["rules"], pod_create);
    assert_eq!(artifacthub_annotation("kubewarden/rules"), pod_create);
    assert_eq!(
        yaml("artifacthub-pkg.yml")["annotations"]["kubewarden/resources"],
        "Pod"
    );
}

#[test]
fn mutation_and_context_aware_resources_agree() {
    let replica = json!([{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica"}]);
    let metadata = yaml("metadata.yml");
    assert_eq!(metadata["mutating"], true);
    assert_eq!(policy()["spec"]["mutating"], true);
    assert_eq!(
        yaml("artifacthub-pkg.yml")["annotations"]["kubewarden/mutation"],
        "true"
    );
    assert_eq!(metadata["contextAwareResources"], replica);
    assert_eq!(policy()["spec"]["contextAwareResources"], replica);
    assert_eq!(artifacthub_annotation("kubewarden/contextAwareResources"), replica);
    assert_eq!(metadata["backgroundAudit"], false);
    assert_eq!(policy()["spec"]["backgroundAudit"], false);
    assert_eq!(metadata["executionMode"], "kubewarden-wapc");
}

#[test]
fn only_omenative_pods_reach_the_policy_server() {
    assert_eq!(
        policy()["spec"]["objectSelector"],
        json!({"matchExpressions": [{
            "key": ome_spread_core::labels::MANAGED_BY, "operator": "In", "values": [ome_spread_core::labels::OME_NATIVE],
        }]})
    );
    assert_eq!(policy()["spec"]["failurePolicy"], "Ignore");
}

#[test]
fn the_shipped_settings_are_valid() {
    assert_eq!(
        ome_spread_core::settings::Settings::from_json(&policy()["spec"]["settings"]).map(|_| ()),
        Ok(())
    );
}

#[test]
fn the_policy_server_may_only_get_inferencereplicas() {
    let roles: Vec<Value> = yaml_documents("policy.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "ClusterRole")
        .collect();
    assert_eq!(roles.len(), 1);
    assert_eq!(
        roles[0]["rules"],
        json!([{"apiGroups": ["ome.io"], "resources": ["inferencereplicas"], "verbs": ["get"]}])
    );
}

/// `kwctl scaffold artifacthub` refuses an author without an e-mail ("must be csv values of
/// \"name <email>\"") and takes the maintainers from it.
#[test]
fn the_author_is_a_name_and_an_email_and_artifact_hub_lists_them() {
    assert_eq!(
        yaml("metadata.yml")["annotations"]["io.kubewarden.policy.author"],
        "ome-spread developers <maintainers@ome-spread.dev>"
    );
    assert_eq!(
        yaml("artifacthub-pkg.yml")["maintainers"],
        json!([{"name": "ome-spread developers", "email": "maintainers@ome-spread.dev"}])
    );
}

/// The install notes name what a user must apply besides the policy: `kwctl scaffold manifest`,
/// which kwctl's own notes suggest, grants no read of InferenceReplicas.
#[test]
fn artifact_hubs_install_notes_point_at_policy_yaml_and_its_rbac() {
    let artifacthub = yaml("artifacthub-pkg.yml");
    let install = artifacthub["install"].as_str().expect("install notes");
    assert!(
        install.starts_with(
            "A release of ome-spread pushes the policy to `ghcr.io/ome-spread/policies/ome-spread`; \
             nothing is published there\nyet."
        ),
        "{install}"
    );
    assert!(
        install.contains("`spec.module` set\nto what you pushed (`registry://YOUR_REGISTRY/ome-spread:v0.1.0`)"),
        "{install}"
    );
    assert!(install.contains("apply `policy.yaml`"), "{install}");
    assert!(
        install.contains("RBAC that lets the policy-server read InferenceReplicas"),
        "{install}"
    );
    assert!(
        !install.contains("tune it to your liking"),
        "kwctl's notes replaced: {install}"
    );
    assert_eq!(
        artifacthub["createdAt"], "2026-11-30T00:00:00Z",
        "the release date, kept"
    );
}

/// The committed file is what `make artifacthub-pkg.yml` writes, run in a copy of the files it
/// reads. It needs kwctl, which no registry serves: `make e2e-tests` runs it where kwctl is
/// installed, and says it skipped it where not.
#[test]
#[ignore = "needs kwctl: make e2e-tests"]
fn artifacthub_pkg_yml_is_what_make_generates_with_kwctl() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(format!("target/artifacthub-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    for file in ["Makefile", "metadata.yml", "questions-ui.yml", "artifacthub-pkg.yml"] {
        std::fs::copy(root.join(file), dir.join(file)).expect(file);
    }
    let run = std::process::Command::new("make")
        .args(["--always-make", "artifacthub-pkg.yml"])
        .current_dir(&dir)
        .output()
        .expect("make runs");
    assert!(
        run.status.success(),
        "make artifacthub-pkg.yml: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let generated = std::fs::read_to_string(dir.join("artifacthub-pkg.yml")).expect("generated");
    std::fs::remove_dir_all(&dir).expect("scratch removed");
    let committed = std::fs::read_to_string(root.join("artifacthub-pkg.yml")).expect("committed");
    assert!(
        generated == committed,
        "artifacthub-pkg.yml differs from what `make artifacthub-pkg.yml` writes: run it\n{generated}"
    );
}

#[test]
fn one_version_everywhere() {
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("v{version}");
    assert_eq!(
        yaml("metadata.yml")["annotations"]["io.kubewarden.policy.version"],
        version
    );
    let artifacthub = yaml("artifacthub-pkg.yml");
    assert_eq!(artifacthub["version"], version);
    let image = artifacthub["containersImages"][0]["image"].as_str().expect("image");
    assert!(image.ends_with(&format!(":{tag}")), "{image}");
    let module = policy()["spec"]["module"].as_str().map(str::to_owned).expect("module");
    assert!(module.ends_with(&format!(":{tag}")), "{module}");
    // The chart: its version, and the release's tag as its appVersion, which the image's tag
    // defaults to (deploy/ is rendered with no tag set).
    let chart = yaml("charts/ome-spread/Chart.yaml");
    assert_eq!(chart["version"], version);
    assert_eq!(chart["appVersion"], tag.as_str());
    let deployment = yaml_documents("deploy/controller.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the Deployment");
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .map(str::to_owned)
        .expect("image");
    assert_eq!(image, format!("YOUR_REGISTRY/ome-spread-controller:{tag}"));
    assert_eq!(
        policy()["metadata"]["labels"]["app.kubernetes.io/version"],
        tag.as_str()
    );
}

/// Rancher's form for the policy's settings (questions-ui.yml, which `make artifacthub-pkg.yml`
/// embeds as Kubewarden's policies do): one question per setting the chart's schema knows (which
/// controller/tests/chart.rs holds to the policy's own check), each choice the schema's, and every
/// default (null: none), choice and minimum one the policy's settings check accepts.
#[test]
fn rancher_asks_for_exactly_the_settings_and_offers_only_valid_values() {
    let questions = yaml("questions-ui.yml");
    let schema_text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/ome-spread/values.schema.json"),
    )
    .expect("the chart's schema");
    let schema: Value = serde_json::from_str(&schema_text).expect("JSON");
    let settings = &schema["properties"]["settings"]["properties"];
    let mut asked = Vec::new();
    for question in questions["questions"].as_array().expect("questions") {
        let name = question["variable"].as_str().expect("a variable");
        if name == "description" {
            assert_eq!(question["hide_input"], true, "the description is text, not a setting");
            continue;
        }
        asked.push(name.to_owned());
        let accepts = |value: &Value| {
            let one = json!({ name: value });
            ome_spread_core::settings::Settings::from_json(&one).map(|_| ())
        };
        // What Rancher's form sends when the user leaves the question alone.
        assert_eq!(accepts(&question["default"]), Ok(()), "{name}: its default");
        if let Some(options) = question["options"].as_array() {
            let allowed: Vec<&Value> = settings[name]["enum"]
                .as_array()
                .expect("the schema's choices")
                .iter()
                .filter(|v| !v.is_null())
                .collect();
            assert_eq!(
                options.iter().collect::<Vec<_>>(),
                allowed,
                "{name}: the schema's choices"
            );
            for option in options {
                assert_eq!(accepts(option), Ok(()), "{name}: {option}");
            }
        }
        if let Some(min) = question["min"].as_i64() {
            assert_eq!(accepts(&json!(min)), Ok(()), "{name}: its min");
            assert!(accepts(&json!(min - 1)).is_err(), "{name}: below its min");
        }
    }
    let mut known: Vec<String> = settings.as_object().expect("settings").keys().cloned().collect();
    known.sort();
    asked.sort();
    assert_eq!(asked, known);
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("questions-ui.yml"))
        .expect("questions-ui.yml");
    assert_eq!(
        yaml("artifacthub-pkg.yml")["annotations"]["kubewarden/questions-ui"],
        text.as_str(),
        "Artifact Hub carries the form"
    );
}

/// A grant: API group, resource, verb, and the one object it is limited to ("": any).
type Grant = (String, String, String, String);

/// Every grant of a manifest's Roles and ClusterRoles.
fn grants(file: &str) -> std::collections::BTreeSet<Grant> {
    let mut grants = std::collections::BTreeSet::new();
    for role in yaml_documents(file)
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let list = |field: &str| -> Vec<String> {
                rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            let names = match list("resourceNames") {
                names if names.is_empty() => vec![String::new()],
                names => names,
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        for name in &names {
                            grants.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                        }
                    }
                }
            }
        }
    }
    grants
}

fn owned(list: &[(&str, &str, &str, &str)]) -> std::collections::BTreeSet<Grant> {
    list.iter()
        .map(|(g, r, v, n)| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned(), (*n).to_owned()))
        .collect()
}

/// What controller/src calls, and nothing more (docs/security.md says why each): its caches are
/// watches (list and watch, never a get); the policy's ClusterAdmissionPolicy is watched by name
/// (policy.rs); the Lease is read, created and patched by kube-lease-manager (its state.rs) and
/// watched by name (controller.rs); the condition is a server-side apply of the status
/// (reconcile.rs); Events are created and patched by kube's Recorder; reports applied and deleted
/// (report.rs).
#[test]
fn the_controller_and_the_policy_server_get_only_what_they_use() {
    let mut allowed = Vec::new();
    for resource in [
        "inferenceservices",
        "servingruntimes",
        "clusterservingruntimes",
        "inferencereplicas",
    ] {
        allowed.extend([("ome.io", resource, "list", ""), ("ome.io", resource, "watch", "")]);
    }
    let (policy, lease) = ("ome-spread", "ome-spread-controller");
    allowed.extend([
        ("", "pods", "list", ""),
        ("", "pods", "watch", ""),
        ("", "nodes", "list", ""),
        ("", "nodes", "watch", ""),
        ("policies.kubewarden.io", "clusteradmissionpolicies", "list", policy),
        ("policies.kubewarden.io", "clusteradmissionpolicies", "watch", policy),
        ("ome.io", "inferencereplicas/status", "patch", ""),
        ("events.k8s.io", "events", "create", ""),
        ("events.k8s.io", "events", "patch", ""),
        // Each replica's report (report.rs), applied server-side and deleted; named by the
        // replica's uid, so not by a name the RBAC can know.
        ("openreports.io", "reports", "create", ""),
        ("openreports.io", "reports", "patch", ""),
        ("openreports.io", "reports", "delete", ""),
        // A create cannot be limited by name: the object does not exist yet.
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", lease),
        ("coordination.k8s.io", "leases", "patch", lease),
        ("coordination.k8s.io", "leases", "list", lease),
        ("coordination.k8s.io", "leases", "watch", lease),
    ]);
    assert_eq!(grants("deploy/controller-rbac.yaml"), owned(&allowed));
    assert_eq!(
        grants("policy.yaml"),
        owned(&[("ome.io", "inferencereplicas", "get", "")])
    );
}

/// kwctl reads metadata.yml into policy-evaluator's `Metadata` (kubewarden/policy-evaluator,
/// `src/policy_metadata.rs`), which drops any other field silently; `protocolVersion` is kwctl
/// annotate's to set, from the module itself.
#[test]
fn metadata_has_only_fields_kwctl_knows_and_a_minimum_kubewarden_version() {
    let metadata = yaml("metadata.yml");
    let mut fields: Vec<&str> = metadata
        .as_object()
        .expect("a mapping")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "annotations",
            "backgroundAudit",
            "contextAwareResources",
            "executionMode",
            "minimumKubewardenVersion",
            "mutating",
            "policyType",
            "rules"
        ]
    );
    assert_eq!(metadata["minimumKubewardenVersion"], "1.31.0");
}

fn oci_url() -> String {
    let metadata = yaml("metadata.yml");
    metadata["annotations"]["io.kubewarden.policy.ociUrl"]
        .as_str()
        .expect("ociUrl")
        .to_owned()
}

/// kwctl 1.36 and later refuse an ociUrl that is not an OCI reference ("must be a well formed URL:
/// invalid reference format"), as `YOUR_REGISTRY/...` is not; Artifact Hub's package names the
/// policy's image `<ociUrl>:v<version>`, as `kwctl scaffold artifacthub` writes it.
#[test]
fn the_oci_url_is_a_reference_kwctl_accepts_and_artifact_hub_names_it() {
    let url = oci_url();
    assert_eq!(url, "ghcr.io/ome-spread/policies/ome-spread");
    assert!(is_oci_name(&url), "{url}");
    for bad in [
        "YOUR_REGISTRY/ome-spread",
        "ghcr.io/ome-spread/Policies",
        "ghcr.io/ome-spread/",
        "ghcr.io/-a",
    ] {
        assert!(!is_oci_name(bad), "{bad}");
    }
    assert_eq!(
        yaml("artifacthub-pkg.yml")["containersImages"][0]["image"],
        format!("{url}:v{}", env!("CARGO_PKG_VERSION")).as_str()
    );
}

/// An image name without tag or digest, by the OCI distribution reference grammar: an optional
/// domain (a first component with a dot or a port, or `localhost`), then path components of lower
/// case letters and digits joined by `.`, `_`, `__` or a run of `-`.
fn is_oci_name(name: &str) -> bool {
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    if components.len() > 1 && (first.contains(['.', ':']) || first == "localhost") {
        let (host, port) = first.split_once(':').unwrap_or((first, "0"));
        let label = |l: &str| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        if !host.split('.').all(label) || port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()) {
            return false;
        }
        components.remove(0);
    }
    let separator = |c: char| matches!(c, '.' | '_' | '-');
    components.iter().all(|c| {
        !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || separator(ch))
            && !c.starts_with(separator)
            && !c.ends_with(separator)
            && c.split(|ch: char| !separator(ch))
                .filter(|run| !run.is_empty())
                .all(|run| matches!(run, "." | "_" | "__") || run.chars().all(|ch| ch == '-'))
    })
}

/// The chart's resources are sized from the README's sizing table, and its comment says so with
/// the same measurement: CPU and peak memory, the date and the commit.
#[test]
fn the_charts_sizing_comment_states_the_readmes_figures() {
    let read =
        |file: &str| std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).expect(file);
    let readme = read("README.md");
    let row = readme
        .lines()
        .find(|line| line.starts_with("| 1,000 | 10,000 | 20,000 | 5,000 | 1,000 |"))
        .expect("the README's sizing row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let values = read("charts/ome-spread/values.yaml");
    let comment: String = values
        .lines()
        .skip_while(|line| !line.contains("From `make bench-churn`"))
        .take_while(|line| line.trim_start().starts_with('#'))
        .map(|line| line.trim_start().trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        comment.contains(&format!("{}, {} at peak", cells[6], cells[7])),
        "values.yaml: {comment:?}, README: {row}"
    );
    let measured = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let when = comment.split(['(', ':']).nth(1).expect("the date and commit");
    let (date, commit) = when.split_once(", commit ").expect("date, commit");
    assert!(
        measured.contains(&format!("Measured on {date} with the controller at commit {commit}")),
        "README: measured {date} at {commit}"
    );
}

/// The files a user reads or applies, beside the README and docs/.
const USER_FILES: [&str; 7] = [
    "metadata.yml",
    "artifacthub-pkg.yml",
    "policy.yaml",
    "deploy/controller.yaml",
    "deploy/controller-rbac.yaml",
    "deploy/controller-rbac-rebalance.yaml",
    "deploy/Dockerfile",
];

/// README.md and every page of docs/, with their text.
fn markdown_pages() -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/");
    let mut pages: Vec<std::path::PathBuf> = docs
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.push(root.join("README.md"));
    pages.sort();
    pages
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, text)
        })
        .collect()
}

/// The project publishes no policy, image or download of its own yet: what the docs and manifests
/// install is what the user built and pushed, named by the `YOUR_REGISTRY` placeholder; the one
/// registry of its own they name is metadata.yml's ociUrl, where a release would go, and the
/// README says nothing is there. And they cite nothing a user cannot read: no behaviour contract
/// by section, no "seed".
#[test]
fn user_facing_text_names_only_what_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let oci_url = oci_url();
    let mut files = markdown_pages();
    let readme = &files
        .iter()
        .find(|(path, _)| path.ends_with("README.md"))
        .expect("README.md")
        .1;
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        readme.contains(&format!(
            "`{oci_url}`, where a release of this repository pushes it; nothing is published there yet"
        )),
        "README.md says whether anything is published at {oci_url}"
    );
    for file in USER_FILES {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        files.push((root.join(file), text));
    }
    for (path, text) in &files {
        let file = path.display();
        for (at, _) in text.match_indices("ghcr.io/ome-spread") {
            assert!(text[at..].starts_with(&oci_url), "{file}: {}", &text[at..]);
        }
        for unpublished in [
            "ome-spread/ome-spread/releases",
            // The behaviour contract's name, in two halves so that this file does not cite it.
            concat!("SP", "EC"),
            "the seed",
        ] {
            assert!(!text.contains(unpublished), "{file} names {unpublished:?}");
        }
        for (at, _) in text.match_indices("registry://") {
            let reference = &text[at..text[at..].find(char::is_whitespace).map_or(text.len(), |end| at + end)];
            assert!(
                reference.starts_with("registry://YOUR_REGISTRY/"),
                "{file}: {reference}"
            );
        }
    }
    for documents in ["policy.yaml", "deploy/controller.yaml"].map(yaml_documents) {
        for document in documents {
            for container in document["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let image = container["image"].as_str().expect("an image");
                assert!(image.starts_with("YOUR_REGISTRY/"), "{image}");
            }
        }
    }
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every relative link of the README and docs/ names a file of the repository, and its
/// `#anchor`, if any, a heading of that file.
#[test]
fn the_docs_links_point_at_what_exists() {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let pages = markdown_pages();
    let mut headings = std::collections::BTreeMap::new();
    let mut links = Vec::new();
    for (path, text) in &pages {
        let path = path.canonicalize().expect("the page");
        let mut heading: Option<String> = None;
        for event in Parser::new(text) {
            match event {
                Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
                Event::Text(t) | Event::Code(t) if heading.is_some() => heading.as_mut().expect("open").push_str(&t),
                Event::End(TagEnd::Heading(_)) => {
                    let text = heading.take().expect("open");
                    headings
                        .entry(path.clone())
                        .or_insert_with(Vec::new)
                        .push(anchor(&text));
                }
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                    links.push((path.clone(), dest_url.to_string()));
                }
                _ => {}
            }
        }
    }
    let mut checked = 0;
    for (page, link) in links.iter().filter(|(_, link)| !link.contains("://")) {
        let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
        let target = if file.is_empty() {
            page.clone()
        } else {
            page.parent().expect("a folder").join(file)
        };
        let target = target
            .canonicalize()
            .unwrap_or_else(|_| panic!("{}: {link} names no file", page.display()));
        if !fragment.is_empty() {
            let known = headings.get(&target).map(Vec::as_slice).unwrap_or_default();
            assert!(
                known.iter().any(|a| a == fragment),
                "{}: {link}: no such heading in {}",
                page.display(),
                target.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} relative links read: the reading broke");
}
