"""Ray Serve applications for trained policies (filled by the Serve issue)."""
