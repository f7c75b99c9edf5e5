"""The feature areas of ceph/s3-tests' tests (issue 18's gate), shared by
tests/s3tests/run (the summary) and report_plugin.py (--areas selection).
A test belongs to the first area whose markers or name regex it matches."""
import os
import re

# feature areas, first match wins: (area, marker names, test-name regex)
AREAS = [
    ("sse-kms", {"sse_kms"}, r"kms"),
    ("sse-c", set(), r"sse_c|encryption_sse_c|encrypted_transfer|"
                      r"encryption_key_no_sse_c|customer"),
    ("sse-s3", {"sse_s3", "bucket_encryption", "encryption"},
     r"sse_s3|bucket_encryption|encryption"),
    ("object-lock", {"object_lock"}, r"object_lock|legal_hold|retention"),
    ("lifecycle", {"lifecycle", "lifecycle_expiration",
                   "lifecycle_transition", "cloud_transition"}, r"lifecycle"),
    ("logging", {"bucket_logging"}, r"bucket_logging"),
    ("cors", set(), r"cors"),
    ("tagging", {"tagging"}, r"tagging|_tags?_|tags$"),
    ("versioning", {"versioning", "delete_marker"},
     r"version|delete_marker"),
    ("policy/acl/iam", {"bucket_policy", "user_policy", "iam_user",
                        "iam_account", "iam_tenant", "object_ownership",
                        "group_policy", "role_policy", "iam_role"},
     r"policy|acl|public_access|block_public|ownership|grant|anon|"
     r"access_bucket|_perm|tenant"),
    ("post-object", set(), r"post_object"),
    ("website", {"s3website"}, r"website"),
    ("checksum", {"checksum"}, r"checksum"),
    ("multipart", set(), r"multipart|upload_part|abort_"),
    ("copy", {"copy"}, r"copy"),
    ("range", set(), r"range"),
    ("conditional", {"conditional_write"},
     r"_if_|ifmatch|ifnonematch|if_modified|if_unmodified|conditional"),
    ("list", {"list_objects_v2"}, r"list"),
    ("headers", set(), r"^test_headers\.py|header"),
    ("bucket", set(), r"bucket"),
    ("object", set(), r"."),
]
GOAL_AREAS = {"object", "bucket", "list", "multipart", "copy", "range",
              "conditional", "versioning", "tagging", "lifecycle", "sse-c",
              "sse-s3", "cors", "headers"}


def area_of(nodeid, markers):
    name = nodeid.split("::")[-1]
    fname = os.path.basename(nodeid.split("::")[0])
    for area, marks, rx in AREAS:
        if marks & set(markers):
            return area
        if area == "headers" and fname == "test_headers.py":
            return area
        if re.search(rx, name):
            return area
    return "object"
