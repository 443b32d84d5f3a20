"""Create or delete an FSx for Lustre file system on the local endpoint, with none of our tags.

What the FSx CSI driver makes for a claim when its StorageClass carries no extraTags: the
teardown's leftover check must find it by the cluster network alone. No amazon.aws
module manages FSx, hence this helper.
Usage: fsx_leftover.py ENDPOINT_URL REGION create SUBNET_ID   (prints the file system id)
       fsx_leftover.py ENDPOINT_URL REGION delete FS_ID
"""

import sys

import boto3


def main(argv):
    endpoint, region, action, target = argv[1:5]
    fsx = boto3.session.Session(region_name=region).client("fsx", endpoint_url=endpoint)
    if action == "create":
        created = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[target],
                                         Tags=[{"Key": "CSIVolumeName", "Value": "pvc-molecule"}])
        print(created["FileSystem"]["FileSystemId"])
    elif action == "delete":
        fsx.delete_file_system(FileSystemId=target)
    else:
        raise SystemExit("unknown action %s" % action)


if __name__ == "__main__":
    main(sys.argv)
