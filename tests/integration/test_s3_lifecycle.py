"""Bucket lifecycle against a real storaged (storaged/s3/lifecycle.c):
Put/Get/DeleteBucketLifecycleConfiguration and its checks through boto3,
and the lifecycle scanner applying the rules with a shortened day
(STORAGED_TEST_LIFECYCLE_DAY_S, a test-only knob): Expiration by days and
date with prefix, tag and size filters, on unversioned and versioned
buckets (a delete marker), NoncurrentVersionExpiration with
NewerNoncurrentVersions, ExpiredObjectDeleteMarker,
AbortIncompleteMultipartUpload, and the storaged_lifecycle_* counters."""
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

# a lifecycle "day" lasts one second; a pass every 0.3 s
KNOBS = {"STORAGED_TEST_LIFECYCLE_DAY_S": "1",
         "STORAGED_TEST_LIFECYCLE_INTERVAL_S": "0.3"}


def _err(exc_info):
    e = exc_info.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]


def _put(s3, bucket, rules):
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": rules})


def _wait(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def _keys(s3, bucket):
    return sorted(o["Key"] for o in
                  s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def _metric(srv, name):
    text = urllib.request.urlopen(srv.endpoint + "/metrics",
                                  timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


def test_lifecycle_configuration_round_trip_and_checks(s3, bucket):
    with pytest.raises(ClientError) as ei:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert _err(ei) == (404, "NoSuchLifecycleConfiguration")
    rules = [{"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
              "Expiration": {"Days": 3}},
             {"ID": "mp", "Status": "Disabled", "Filter": {"Prefix": ""},
              "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
             {"ID": "old", "Status": "Enabled",
              "Filter": {"And": {"Prefix": "a/", "Tags": [
                  {"Key": "k", "Value": "v"}]}},
              "NoncurrentVersionExpiration": {"NoncurrentDays": 5}}]
    _put(s3, bucket, rules)
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [r["ID"] for r in got] == ["tmp", "mp", "old"]
    assert got[0]["Expiration"] == {"Days": 3}
    assert got[2]["Filter"]["And"]["Tags"] == [{"Key": "k", "Value": "v"}]
    bad = [
        ([{"ID": "t", "Status": "Enabled", "Filter": {"Prefix": ""},
           "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}],
         (501, "NotImplemented")),
        ([{"ID": "z", "Status": "Enabled", "Filter": {"Prefix": ""},
           "Expiration": {"Days": 0}}], (400, "InvalidArgument")),
        ([{"ID": "d", "Status": "Enabled", "Filter": {"Prefix": ""},
           "Expiration": {"Days": 1}},
          {"ID": "d", "Status": "Enabled", "Filter": {"Prefix": "x"},
           "Expiration": {"Days": 1}}], (400, "InvalidArgument")),
        ([{"ID": "x" * 256, "Status": "Enabled", "Filter": {"Prefix": ""},
           "Expiration": {"Days": 1}}], (400, "InvalidArgument")),
        ([{"ID": "t", "Status": "Enabled",
           "Filter": {"Tag": {"Key": "a", "Value": "b"}},
           "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}],
         (400, "InvalidArgument")),
    ]
    for rs, want in bad:
        with pytest.raises(ClientError) as ei:
            _put(s3, bucket, rs)
        assert _err(ei) == want, rs
    # a date must be midnight UTC
    with pytest.raises(ClientError) as ei:
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [{
                "ID": "dt", "Status": "Enabled", "Filter": {"Prefix": ""},
                "Expiration": {"Date": "2030-01-01T10:30:00Z"}}]})
    assert _err(ei)[0] == 400
    # nothing of the refused ones was stored
    assert len(s3.get_bucket_lifecycle_configuration(
        Bucket=bucket)["Rules"]) == 3
    s3.delete_bucket_lifecycle(Bucket=bucket)
    with pytest.raises(ClientError) as ei:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert _err(ei) == (404, "NoSuchLifecycleConfiguration")
    # a bucket holding only its configuration records can be deleted
    _put(s3, bucket, rules[:1])
    s3.delete_bucket(Bucket=bucket)


def test_lifecycle_scanner_expires_current_objects(storaged):
    srv = storaged(env=KNOBS)
    s3 = srv.client()
    b = "lc-plain"
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="tmp/a", Body=b"a")
    s3.put_object(Bucket=b, Key="keep/a", Body=b"a")
    s3.put_object(Bucket=b, Key="tag/yes", Body=b"a", Tagging="kind=scratch")
    s3.put_object(Bucket=b, Key="tag/no", Body=b"a", Tagging="kind=gold")
    s3.put_object(Bucket=b, Key="big/x", Body=b"x" * 2000)
    s3.put_object(Bucket=b, Key="big/y", Body=b"y" * 10)
    s3.put_object(Bucket=b, Key="date/z", Body=b"z")
    _put(s3, b, [
        {"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
         "Expiration": {"Days": 2}},
        {"ID": "tag", "Status": "Enabled",
         "Filter": {"Tag": {"Key": "kind", "Value": "scratch"}},
         "Expiration": {"Days": 1}},
        {"ID": "size", "Status": "Enabled",
         "Filter": {"And": {"Prefix": "big/", "ObjectSizeGreaterThan": 1000}},
         "Expiration": {"Days": 1}},
        {"ID": "date", "Status": "Enabled", "Filter": {"Prefix": "date/"},
         "Expiration": {"Date": "2020-01-01T00:00:00Z"}},
        {"ID": "off", "Status": "Disabled", "Filter": {"Prefix": "keep/"},
         "Expiration": {"Days": 1}},
    ])
    want = ["big/y", "keep/a", "tag/no"]
    assert _wait(lambda: _keys(s3, b) == want), _keys(s3, b)
    assert _metric(srv, "storaged_lifecycle_passes_total") >= 1
    assert _metric(srv, 'storaged_lifecycle_actions_total{action='
                   '"expiration"}') == 4
    assert _metric(srv, "storaged_lifecycle_errors_total") == 0
    # unversioned: nothing is kept
    assert "Versions" not in s3.list_object_versions(Bucket=b, Prefix="tmp/")


def test_lifecycle_scanner_on_versions_and_uploads(storaged):
    srv = storaged(env=KNOBS)
    s3 = srv.client()
    b = "lc-vers"
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b,
                             VersioningConfiguration={"Status": "Enabled"})
    ids = [s3.put_object(Bucket=b, Key="nc/k", Body=b"v%d" % i)["VersionId"]
           for i in range(4)]
    nt = {}
    for k, tags in (("nt/a", "keep=no"), ("nt/b", "keep=yes")):
        nt[k] = [s3.put_object(Bucket=b, Key=k, Body=b"x", Tagging=tags)
                 ["VersionId"] for _ in range(2)]
    s3.put_object(Bucket=b, Key="exp/e", Body=b"e")
    s3.put_object(Bucket=b, Key="dm/d", Body=b"d")
    s3.delete_object(Bucket=b, Key="dm/d")  # a marker over one version
    up = s3.create_multipart_upload(Bucket=b, Key="mp/u")["UploadId"]
    _put(s3, b, [
        {"ID": "nc", "Status": "Enabled", "Filter": {"Prefix": "nc/"},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1,
                                         "NewerNoncurrentVersions": 1}},
        {"ID": "nt", "Status": "Enabled",
         "Filter": {"And": {"Prefix": "nt/", "Tags": [
             {"Key": "keep", "Value": "no"}]}},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
        {"ID": "exp", "Status": "Enabled", "Filter": {"Prefix": "exp/"},
         "Expiration": {"Days": 1}},
        {"ID": "dmv", "Status": "Enabled", "Filter": {"Prefix": "dm/"},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
        {"ID": "dm", "Status": "Enabled", "Filter": {"Prefix": "dm/"},
         "Expiration": {"ExpiredObjectDeleteMarker": True}},
        {"ID": "mp", "Status": "Enabled", "Filter": {"Prefix": "mp/"},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    ])

    def state():
        r = s3.list_object_versions(Bucket=b)
        v = sorted((x["Key"], x["VersionId"]) for x in r.get("Versions", []))
        d = sorted(x["Key"] for x in r.get("DeleteMarkers", []))
        u = [x["UploadId"] for x in
             s3.list_multipart_uploads(Bucket=b).get("Uploads", [])]
        return v, d, u

    # nc/k keeps its current version and the newest non-current one;
    # nt/a loses its old version (tagged keep=no), nt/b keeps it;
    # exp/e gets a delete marker over its one version; dm/d loses its old
    # version, then its marker (the last version left); the upload goes
    want = (sorted([("nc/k", ids[3]), ("nc/k", ids[2]), ("nt/a", nt["nt/a"][1]),
                    ("nt/b", nt["nt/b"][1]), ("nt/b", nt["nt/b"][0]),
                    ("exp/e", s3.head_object(Bucket=b, Key="exp/e")
                     ["VersionId"])]), ["exp/e"], [])
    assert _wait(lambda: state() == want), state()
    assert _body_ok(s3, b, "nc/k", ids[2], b"v2")
    with pytest.raises(ClientError) as ei:
        s3.get_object(Bucket=b, Key="exp/e")
    assert _err(ei) == (404, "NoSuchKey")
    assert up not in state()[2]
    for action, n in (("noncurrent_expiration", 4),
                      ("expired_delete_marker", 1), ("abort_multipart", 1)):
        assert _metric(srv, 'storaged_lifecycle_actions_total{action="%s"}'
                       % action) == n, action


def _body_ok(s3, b, key, vid, want):
    return s3.get_object(Bucket=b, Key=key,
                         VersionId=vid)["Body"].read() == want


def test_lifecycle_rules_get_ids_and_keep_their_form(s3, bucket):
    """As S3: a rule put without an ID gets one; GET gives back each rule
    in the form it was put (rule-level Prefix or Filter); a malformed date
    in a Transition is 400 before transitions are refused (501)."""
    _put(s3, bucket, [
        {"Expiration": {"Days": 31}, "Prefix": "test1/", "Status": "Enabled"},
        {"ID": "f", "Filter": {"Prefix": "p/"}, "Status": "Enabled",
         "Expiration": {"Date": "2031-01-01T00:00:00Z"}}])
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got[0]["ID"] and got[0]["Prefix"] == "test1/"
    assert got[0]["Expiration"] == {"Days": 31}
    assert got[1]["Filter"] == {"Prefix": "p/"} and "Prefix" not in got[1]
    assert got[1]["Expiration"]["Date"].year == 2031
    with pytest.raises(ClientError) as ei:
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [{
                "ID": "t", "Status": "Enabled", "Prefix": "x/",
                "Transitions": [{"Date": "2030-01-01T12:00:00Z",
                                 "StorageClass": "GLACIER"}]}]})
    assert _err(ei) == (400, "InvalidArgument")


def test_expiration_header_on_put_and_head(s3, bucket):
    """x-amz-expiration on PutObject and HeadObject of a key an Expiration
    rule applies to (real days, rounded up to midnight UTC, as AWS)."""
    import datetime
    import email.utils
    import re

    _put(s3, bucket, [{"ID": "r1", "Status": "Enabled",
                       "Filter": {"Prefix": "days1/"},
                       "Expiration": {"Days": 1}}])
    now = datetime.datetime.now(datetime.timezone.utc)
    hdrs = s3.put_object(Bucket=bucket, Key="days1/a", Body=b"x")[
        "ResponseMetadata"]["HTTPHeaders"]
    m = re.match(r'expiry-date="(.+)", rule-id="(.+)"',
                 hdrs["x-amz-expiration"])
    due = email.utils.parsedate_to_datetime(m.group(1))
    assert m.group(2) == "r1" and (due - now).days == 1
    assert due.hour == 0 and due.minute == 0
    h = s3.head_object(Bucket=bucket, Key="days1/a")
    assert h["Expiration"] == hdrs["x-amz-expiration"]
    s3.put_object(Bucket=bucket, Key="other", Body=b"x")
    assert "Expiration" not in s3.head_object(Bucket=bucket, Key="other")
    s3.delete_bucket_lifecycle(Bucket=bucket)
    assert "Expiration" not in s3.head_object(Bucket=bucket, Key="days1/a")
