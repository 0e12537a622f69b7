python3.14 --help-xoptions | grep -i -A1 remote; python3.14 -X disable-remote-debug -c "import sys; print(sys.is_remote_debug_enabled())"
