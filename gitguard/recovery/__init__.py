"""After an agent crash: resume, the recovery scan and note, restore, compensation."""
