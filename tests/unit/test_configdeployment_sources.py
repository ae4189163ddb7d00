"""Unit tests of what a ConfigDeployment rolls on: cache digests, key filters, the hash.

Pure functions, no cluster. The upgrade tests pin hashes computed by the controller
before ``spec.secrets`` existed: a ConfigDeployment that names only a ConfigMap must get
the very same pod template annotations after the upgrade, or every one of them would
roll when the operator is upgraded.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from cronjob_operator.controllers.configdeployment import decide, sources
from cronjob_operator.runtime import objects

REPO = Path(__file__).resolve().parents[2]
NS = "ns1"
SECRET_UID = "7d0c1f4e-2b3a-4c5d-8e9f-0a1b2c3d4e5f"


def config_map(
    data: dict[str, str] | None = None,
    binary_data: dict[str, str] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": NS, "uid": "cm-uid", **metadata},
    }
    if data is not None:
        cm["data"] = data
    if binary_data is not None:
        cm["binaryData"] = binary_data
    return cm


def secret(uid: str = SECRET_UID, **values: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": NS, "uid": uid, "resourceVersion": "7"},
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
    }


def digested_cm(*args: Any, **kwargs: Any) -> objects.Obj:
    frozen: objects.Obj = objects.freeze(sources.digest_config_map(config_map(*args, **kwargs)))
    return frozen


def digested_secret(*args: Any, **kwargs: Any) -> objects.Obj:
    frozen: objects.Obj = objects.freeze(sources.digest_secret(secret(*args, **kwargs)))
    return frozen


def spec_sources(**spec: Any) -> sources.Sources:
    return sources.sources_of(objects.freeze({"spec": spec}))


def hash_of(
    wanted: sources.Sources, cm: objects.Obj | None = None, db: objects.Obj | None = None
) -> str:
    return sources.content_hash(wanted, cm, {} if db is None else {"db": db})


# -- the whole-content hash (unchanged since the first version) --------------------------


class TestWholeContentHash:
    def test_is_stable_across_key_order(self) -> None:
        a = config_map({"a": "1", "b": "2"}, {"bin": "AAEC"})
        b = config_map({"b": "2", "a": "1"}, {"bin": "AAEC"})
        assert sources.whole_content_hash(a) == sources.whole_content_hash(b)
        assert len(sources.whole_content_hash(a)) == 64

    def test_changes_with_data_and_binary_data(self) -> None:
        assert sources.whole_content_hash(config_map({"a": "1"})) != sources.whole_content_hash(
            config_map({"a": "2"})
        )
        assert sources.whole_content_hash(
            config_map({"a": "1"}, {"b": "AA=="})
        ) != sources.whole_content_hash(config_map({"a": "1"}, {"b": "AQ=="}))

    def test_distinguishes_data_from_binary_data(self) -> None:
        assert sources.whole_content_hash(config_map({"k": "AA=="})) != sources.whole_content_hash(
            config_map(binary_data={"k": "AA=="})
        )

    def test_ignores_labels_and_metadata(self) -> None:
        plain = config_map({"a": "1"})
        labelled = config_map({"a": "1"}, labels={"x": "y"}, resourceVersion="99")
        assert sources.whole_content_hash(plain) == sources.whole_content_hash(labelled)

    def test_empty_and_missing_are_the_same(self) -> None:
        assert sources.whole_content_hash(config_map()) == sources.whole_content_hash(
            config_map({}, {})
        )


class TestUpgradeKeepsEveryPodTemplate:
    """Pinned values from the controller as it was before spec.secrets (commit ef1fe96)."""

    CONFIG_MAP = config_map(
        {"greeting": "hello", "settings.ini": "[server]\nport = 8080\n"},
        {"logo.png": "iVBORw0KGgo="},
    )
    OLD_CONFIG_HASH = "4d1278296cf5ef3f6bdd5d7db96ccf7ad4130337bae7e038cb6ddd3271138e83"
    OLD_SPEC_HASH = "e3f97254f13efd3f5ee71552fce8c8b48b015e96b9adb43877974d8a9dca8e18"
    CONFIG_DEPLOYMENT = objects.freeze(
        {
            "apiVersion": "apps.tutorial.kubebuilder.io/v1",
            "kind": "ConfigDeployment",
            "metadata": {
                "name": "web",
                "namespace": NS,
                "uid": "0b4d6f1e-3c2a-4e5f-9a7b-8c9d0e1f2a3b",
            },
            "spec": {
                "configMap": "settings",
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
                },
            },
        }
    )

    def test_the_hash_from_the_cache_digest_is_the_old_hash(self) -> None:
        digested = objects.freeze(sources.digest_config_map(objects.thaw(self.CONFIG_MAP)))
        wanted = sources.sources_of(self.CONFIG_DEPLOYMENT)
        assert hash_of(wanted, digested) == self.OLD_CONFIG_HASH

    def test_the_desired_deployment_carries_the_old_annotations(self) -> None:
        digested = objects.freeze(sources.digest_config_map(objects.thaw(self.CONFIG_MAP)))
        wanted = sources.sources_of(self.CONFIG_DEPLOYMENT)
        desired = decide.desired_deployment(self.CONFIG_DEPLOYMENT, hash_of(wanted, digested))
        assert desired["metadata"]["annotations"] == {
            decide.SPEC_HASH_ANNOTATION: self.OLD_SPEC_HASH
        }
        assert decide.rolled_out_hash(desired) == self.OLD_CONFIG_HASH
        # A Deployment the old controller wrote is therefore left as it is.
        assert not decide.needs_update(objects.freeze(desired), desired)

    def test_the_samples_hash_is_the_one_the_readme_shows(self) -> None:
        sample = yaml.safe_load(
            (REPO / "config" / "samples" / "configdeployment_configmap.yaml").read_text()
        )
        digested = objects.freeze(sources.digest_config_map(sample))
        wanted = spec_sources(configMap=sample["metadata"]["name"])
        assert decide.short_hash(hash_of(wanted, digested)) == "592da0f732"


# -- the cache transforms ------------------------------------------------------------------


class TestDigests:
    def test_a_config_map_keeps_metadata_and_digests_only(self) -> None:
        big = "x" * 10240
        full = config_map(
            {"app.yaml": big},
            {"logo": "AAEC"},
            labels={"team": "a"},
            annotations={"kubectl.kubernetes.io/last-applied-configuration": big},
            resourceVersion="42",
            managedFields=[{"manager": "kubectl"}],
        )
        digested = sources.digest_config_map(json.loads(json.dumps(full)))
        assert set(digested) == {"apiVersion", "kind", "metadata", "contentHash", "keyDigests"}
        assert digested["metadata"] == {
            "name": "settings",
            "namespace": NS,
            "uid": "cm-uid",
            "resourceVersion": "42",
        }
        assert set(digested["keyDigests"]) == {"app.yaml", "logo"}
        assert digested["contentHash"] == sources.whole_content_hash(full)
        assert len(json.dumps(digested)) < 500

    def test_a_secret_value_is_never_kept(self) -> None:
        full = secret(password="hunter2", user="admin")
        digested = sources.digest_secret(objects.thaw(full))
        assert set(digested) == {"apiVersion", "kind", "metadata", "keyDigests"}
        text = json.dumps(digested)
        for value in ("hunter2", "admin", *full["data"].values()):
            assert value not in text
        assert set(digested["keyDigests"]) == {"password", "user"}

    def test_a_secret_digest_is_keyed_by_its_uid(self) -> None:
        """A plain sha256 of a short value could be found by trying values; this cannot
        without the Secret's uid, which the pod template does not carry."""
        once = digested_secret(password="1234")["keyDigests"]["password"]
        again = digested_secret(password="1234")["keyDigests"]["password"]
        recreated = digested_secret("another-uid", password="1234")["keyDigests"]["password"]
        assert once == again
        assert once != recreated
        plain = hashlib.sha256(secret(password="1234")["data"]["password"].encode())
        assert once != plain.hexdigest()


# -- sources, key filters and the hash -----------------------------------------------------


class TestSourcesOf:
    def test_reads_config_map_keys_and_secrets(self) -> None:
        wanted = spec_sources(
            configMap="settings",
            configMapKeys=["a"],
            secrets=[{"name": "db", "keys": ["password"]}, {"name": "tls"}],
        )
        assert wanted == sources.Sources(
            sources.Source("settings", ("a",)),
            (sources.Source("db", ("password",)), sources.Source("tls")),
        )
        assert not wanted.whole_config_map_only

    def test_the_original_form_is_recognised(self) -> None:
        assert spec_sources(configMap="settings").whole_config_map_only
        assert not spec_sources(secrets=[{"name": "db"}]).whole_config_map_only

    def test_the_secrets_index_names_every_secret(self) -> None:
        cd = objects.freeze({"spec": {"secrets": [{"name": "db"}, {"name": "tls"}]}})
        assert sources.secret_names(cd) == ["db", "tls"]
        assert sources.secret_names(objects.freeze({"spec": {"configMap": "x"}})) == []


class TestContentHash:
    def test_a_config_map_key_filter_ignores_other_keys(self) -> None:
        wanted = spec_sources(configMap="settings", configMapKeys=["a"])
        base = hash_of(wanted, digested_cm({"a": "1", "b": "1"}))
        assert hash_of(wanted, digested_cm({"a": "1", "b": "2", "c": "3"})) == base
        assert hash_of(wanted, digested_cm({"a": "2", "b": "1"})) != base

    def test_a_filtered_key_appearing_or_disappearing_changes_the_hash(self) -> None:
        wanted = spec_sources(configMap="settings", configMapKeys=["a"])
        absent = hash_of(wanted, digested_cm({"b": "1"}))
        assert hash_of(wanted, digested_cm({"a": ""})) != absent
        assert hash_of(wanted, digested_cm({"b": "2"})) == absent

    def test_a_secret_change_changes_the_hash(self) -> None:
        wanted = spec_sources(configMap="settings", secrets=[{"name": "db"}])
        cm = digested_cm({"a": "1"})
        before = hash_of(wanted, cm, digested_secret(password="a"))
        assert hash_of(wanted, cm, digested_secret(password="a")) == before
        assert hash_of(wanted, cm, digested_secret(password="b")) != before
        assert hash_of(wanted, digested_cm({"a": "2"}), digested_secret(password="a")) != before

    def test_a_secret_key_filter_ignores_other_keys(self) -> None:
        wanted = spec_sources(secrets=[{"name": "db", "keys": ["password"]}])
        before = hash_of(wanted, None, digested_secret(password="a", user="x"))
        assert hash_of(wanted, None, digested_secret(password="a", user="y")) == before
        assert hash_of(wanted, None, digested_secret(password="b", user="x")) != before

    def test_secret_only_needs_no_config_map(self) -> None:
        wanted = spec_sources(secrets=[{"name": "db"}])
        assert len(hash_of(wanted, None, digested_secret(password="a"))) == 64

    def test_the_whole_config_map_form_is_the_content_hash(self) -> None:
        cm = digested_cm({"a": "1"})
        assert hash_of(spec_sources(configMap="settings"), cm) == cm["contentHash"]
