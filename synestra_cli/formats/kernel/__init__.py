"""Host system logs: syslog, the journal and the kernel ring buffer, and the kernel events typed from them."""
