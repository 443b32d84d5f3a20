#!/bin/sh
# Installs and checks the MPI variant's ssh configuration (trainer/Dockerfile, TRAINER_MPI=1):
#   sshd_config -> /etc/ssh/trainfleet/sshd_config  (workers: /usr/sbin/sshd -De -f /etc/ssh/trainfleet/sshd_config)
#   ssh_config  -> /etc/ssh/ssh_config.d/trainfleet.conf  (the launcher's ssh, included by /etc/ssh/ssh_config)
# and checks them the way a worker runs them: sshd -T as the trainer's user (uid $1, gid $2) with a
# throwaway host key, since the job's key only exists once the mpi-operator mounts its Secret.
# Usage: install.sh UID GID (as root, during the image build).
set -eu
uid=$1
gid=$2
here=$(cd "$(dirname "$0")" && pwd)
install -d -m 0755 /etc/ssh/trainfleet /etc/ssh/ssh_config.d
install -m 0644 "$here/sshd_config" /etc/ssh/trainfleet/sshd_config
install -m 0644 "$here/ssh_config" /etc/ssh/ssh_config.d/trainfleet.conf
grep -q '^Include /etc/ssh/ssh_config.d/\*\.conf' /etc/ssh/ssh_config \
  || { echo "/etc/ssh/ssh_config does not include /etc/ssh/ssh_config.d/*.conf" >&2; exit 1; }
# The package's host keys are gone (trainer/Dockerfile deletes them in its large layer): this sshd
# uses the job's key.

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ssh-keygen -q -t ed25519 -N '' -C '' -f "$tmp/host"
chmod 0755 "$tmp"
chmod 0644 "$tmp/host"
as_trainer() { setpriv --reuid "$uid" --regid "$gid" --clear-groups "$@"; }
as_trainer /usr/sbin/sshd -t -f /etc/ssh/trainfleet/sshd_config -o HostKey="$tmp/host"
as_trainer /usr/sbin/sshd -T -f /etc/ssh/trainfleet/sshd_config -o HostKey="$tmp/host" > "$tmp/sshd-T"
for want in "port 2222" "hostkey /home/trainer/.ssh/id_rsa" "authorizedkeysfile /home/trainer/.ssh/authorized_keys" \
            "pidfile /tmp/sshd.pid" "usepam no" "passwordauthentication no" "strictmodes no"; do
  grep -qx "$want" "$tmp/sshd-T" || { echo "sshd -T: no '$want'" >&2; cat "$tmp/sshd-T" >&2; exit 1; }
done
# SetEnv carries the image's ENV into what mpirun starts over ssh: it must match the ENV of this build.
for name in PYTHONPATH PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE MPLBACKEND TRAINFLEET_DATA_CACHE USE_LIBUV; do
  value=$(printenv "$name")
  grep '^setenv ' "$tmp/sshd-T" | tr ' ' '\n' | grep -qx "$name=$value" \
    || { echo "sshd_config SetEnv has no $name=$value (the image's ENV)" >&2; exit 1; }
done
home=$(getent passwd "$uid" | cut -d: -f6)
[ "$home" = /home/trainer ] || { echo "the trainer's home is $home, sshd_config expects /home/trainer" >&2; exit 1; }
as_trainer ssh -G worker-0 > "$tmp/ssh-G"
for want in "port 2222" "connectionattempts 10" "identityfile /home/trainer/.ssh/id_rsa" "stricthostkeychecking false" "userknownhostsfile /dev/null"; do
  grep -qx "$want" "$tmp/ssh-G" || { echo "ssh -G: no '$want'" >&2; cat "$tmp/ssh-G" >&2; exit 1; }
done
echo "trainfleet mpi: sshd and ssh configuration checked"
