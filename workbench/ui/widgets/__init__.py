"""The app's widgets: chat, prompt box and the four live panels."""
