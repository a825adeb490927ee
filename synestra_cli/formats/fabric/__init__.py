"""The network fabric: InfiniBand and Ethernet port counters, link reports, switch vitals, cabling topology."""
