"""Tags given with a PutObject (x-amz-tagging) against a real storaged:
GetObjectTagging lists them (URL-decoded, in order), GET/HEAD carry
x-amz-tagging-count (as S3) rather than the raw header, and CopyObject keeps
them."""


def test_put_tagging_is_readable(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x",
                  Tagging="project=ecfs&team=storage%20core&empty=")
    tags = s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]
    assert tags == [{"Key": "project", "Value": "ecfs"},
                    {"Key": "team", "Value": "storage core"},
                    {"Key": "empty", "Value": ""}]
    g = s3.get_object(Bucket=bucket, Key="t")
    hdrs = g["ResponseMetadata"]["HTTPHeaders"]
    assert g["TagCount"] == 3
    assert "x-amz-tagging" not in hdrs
    assert s3.head_object(Bucket=bucket, Key="t")["ResponseMetadata"][
        "HTTPHeaders"]["x-amz-tagging-count"] == "3"
    s3.copy_object(Bucket=bucket, Key="t2", CopySource="%s/t" % bucket)
    assert s3.get_object_tagging(Bucket=bucket, Key="t2")["TagSet"] == tags
    # no tags: an empty set and no count
    s3.put_object(Bucket=bucket, Key="plain", Body=b"y")
    assert s3.get_object_tagging(Bucket=bucket, Key="plain")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="plain")
